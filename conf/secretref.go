package conf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A secret reference is how APISIX lets a credential name a value held outside the
// config store: "$env://NAME" is the environment variable NAME, "$env://NAME/KEY" the
// member KEY of NAME's value (a JSON object), and "$secret://manager/id/key" a secret
// manager's entry, which gw does not support yet. APISIX matches the $env:// prefix in
// any case; gw does so for $secret:// as well, so that no spelling of a reference is ever
// taken as a plain value.
const (
	envRefPrefix    = "$env://"
	secretRefPrefix = "$secret://"
)

// SecretRef is one parsed $env:// reference.
type SecretRef struct {
	// Env is the environment variable's name.
	Env string
	// Member, when not "", is the member of Env's value (a JSON object) that is the secret.
	Member string
}

// IsSecretRef reports whether s is written as a secret reference ($env:// or $secret://
// in any case), valid or not. A credential that still reads so after the master has
// resolved it names no value, and nothing may match it.
func IsSecretRef(s string) bool {
	return hasPrefixFold(s, envRefPrefix) || hasPrefixFold(s, secretRefPrefix)
}

// errSecretManager is why a $secret:// reference is refused.
var errSecretManager = errors.New("secret managers ($secret://) are not supported yet; " +
	"use $env://NAME to take the value from the gateway's environment")

// ParseSecretRef reads s as a secret reference. isRef is false when s is not written as
// one: a plain value. err, with isRef true, says why gw cannot resolve it: a $secret://
// reference, or an $env:// name that is not a variable name.
func ParseSecretRef(s string) (ref SecretRef, isRef bool, err error) {
	switch {
	case hasPrefixFold(s, secretRefPrefix):
		return SecretRef{}, true, errSecretManager
	case !hasPrefixFold(s, envRefPrefix):
		return SecretRef{}, false, nil
	}
	name, member, hasMember := strings.Cut(s[len(envRefPrefix):], "/")
	if !isEnvName(name) {
		return SecretRef{}, true, fmt.Errorf(`%q: the name after $env:// must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got %q`, s, name)
	}
	if hasMember && member == "" {
		return SecretRef{}, true, fmt.Errorf(`%q: a "/" after the variable's name must be followed by the member to take from its JSON value`, s)
	}
	return SecretRef{Env: name, Member: member}, true, nil
}

// Resolve looks the reference up with lookup (os.LookupEnv, in the master). ok is false
// when there is no usable value: the variable is unset, empty or not UTF-8, or its
// member is missing or not a non-empty string. A credential with no value must match no
// request.
func (r SecretRef) Resolve(lookup func(string) (string, bool)) (value string, ok bool) {
	value, ok = lookup(r.Env)
	if !ok || value == "" || !utf8.ValidString(value) {
		return "", false
	}
	if r.Member == "" {
		return value, true
	}
	var members map[string]json.RawMessage
	if json.Unmarshal([]byte(value), &members) != nil {
		return "", false
	}
	if json.Unmarshal(members[r.Member], &value) != nil || value == "" {
		return "", false
	}
	return value, true
}

// String gives the reference as "$env://NAME" or "$env://NAME/MEMBER", for messages.
func (r SecretRef) String() string {
	if r.Member == "" {
		return envRefPrefix + r.Env
	}
	return envRefPrefix + r.Env + "/" + r.Member
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isEnvName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}
