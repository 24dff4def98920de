package authn

import (
	"encoding/json"
	"fmt"
	"iter"
	"net/http"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// InvalidUserBody is APISIX's 401 body for credentials that name no consumer, and for
// every failure on a route whose anonymous consumer does not exist.
var InvalidUserBody = []byte(`{"message":"Invalid user authorization"}` + "\n")

var (
	contentTypeJSON = []byte("application/json")
	wwwAuthenticate = []byte("WWW-Authenticate")
)

// Usernames is the set of snap's consumers, for anonymous_consumer. A nil snap has none.
func Usernames(snap *conf.Snapshot) map[string]bool {
	names := map[string]bool{}
	if snap != nil {
		for i := range snap.Consumers {
			names[snap.Consumers[i].Username] = true
		}
	}
	return names
}

// Credentials yields the username and configuration of each of snap's consumers that
// configures plugin, in the snapshot's order: the order in which the older consumer
// keeps a credential two of them claim.
func Credentials(snap *conf.Snapshot, plugin string) iter.Seq2[string, json.RawMessage] {
	return func(yield func(string, json.RawMessage) bool) {
		if snap == nil {
			return
		}
		for i := range snap.Consumers {
			c := &snap.Consumers[i]
			if raw, ok := c.Plugins[plugin]; ok && !yield(c.Username, raw) {
				return
			}
		}
	}
}

// Rejection is how one route's auth plugin answers a request it cannot authenticate. It
// is immutable after NewRejection and safe for concurrent use.
type Rejection struct {
	challenge   []byte // the WWW-Authenticate value
	anonymous   string
	anonymousOK bool // whether anonymous exists in the route's snapshot
}

// NewRejection makes a route's Rejection: challenge is its WWW-Authenticate value,
// anonymous its anonymous_consumer ("" for none) and consumers the snapshot's usernames.
func NewRejection(challenge, anonymous string, consumers map[string]bool) Rejection {
	return Rejection{
		challenge:   []byte(challenge),
		anonymous:   anonymous,
		anonymousOK: anonymous != "" && consumers[anonymous],
	}
}

// Reject answers c with 401, body and the challenge, and returns true. On a route with an
// anonymous consumer it instead sets c.Consumer to it and returns false, and the caller
// hides the credentials if configured to; should that consumer not exist, every failure
// is 401 "Invalid user authorization", as in APISIX.
func (r *Rejection) Reject(c *plugins.Ctx, body []byte) bool {
	if r.anonymous != "" {
		if r.anonymousOK {
			c.Consumer = r.anonymous
			return false
		}
		body = InvalidUserBody
	}
	c.AddResponseHeader(wwwAuthenticate, r.challenge)
	c.Respond(http.StatusUnauthorized, contentTypeJSON, body)
	return true
}

// Realm reads APISIX's realm: 1-128 printable ASCII characters, neither '"' nor '\',
// since it is written inside a quoted string of the WWW-Authenticate header.
func Realm(m pluginconf.Member) (string, error) {
	s, err := m.NonEmptyString()
	if err != nil {
		return "", err
	}
	ok := len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '"' && s[i] != '\\'
	}
	if !ok {
		return "", fmt.Errorf("%s: must be 1-128 printable ASCII characters without '\"' or '\\', got %s", m.Name, m.Show())
	}
	return s, nil
}

// CheckSecretRef refuses a credential written as a secret reference that gw cannot
// resolve ($secret://, or $env:// without a variable name), naming the member; a plain
// value or an $env:// reference passes. An auth plugin lists the members it checks so in
// its SecretFields (plugins.ConsumerAuth), for the master to resolve.
func CheckSecretRef(member, value string) error {
	if _, isRef, err := conf.ParseSecretRef(value); isRef && err != nil {
		return fmt.Errorf("%s: %w", member, err)
	}
	return nil
}
