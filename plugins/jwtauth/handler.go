package jwtauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/authn"
)

// APISIX's 401 bodies (apisix/plugins/jwt-auth.lua), as core.response.exit writes them.
var (
	missingTokenBody = []byte(`{"message":"Missing JWT token in request"}` + "\n")
	invalidTokenBody = []byte(`{"message":"JWT token invalid"}` + "\n")
	missingKeyBody   = []byte(`{"message":"missing user key in JWT token"}` + "\n")
	invalidKeyBody   = []byte(`{"message":"Invalid user key in JWT token"}` + "\n")
	failedBody       = []byte(`{"message":"failed to verify jwt"}` + "\n")
)

// credential is one consumer as jwt-auth checks it.
type credential struct {
	username string
	method   jwt.SigningMethod
	// key checks the signature: []byte for HMAC, the parsed public key otherwise.
	key any
	// leeway is lifetime_grace_period, in seconds.
	leeway int64
}

// index is one snapshot's consumers by key. It is built once per snapshot, shared by
// every route's instance, and never changes after.
type index struct {
	byKey     map[string]*credential
	consumers map[string]bool
}

var _ plugins.SnapshotBuilder = plugin{}

// BuildSnapshot indexes the snapshot's keys once, for every route's instance.
func (plugin) BuildSnapshot(snap *conf.Snapshot, _ *plugins.Shared) (any, error) {
	return newIndex(snap), nil
}

func newIndex(snap *conf.Snapshot) *index {
	idx := &index{byKey: map[string]*credential{}, consumers: authn.Usernames(snap)}
	for username, raw := range authn.Credentials(snap, Name) {
		cc, err := ParseConsumer(raw)
		if err != nil {
			continue // the Admin API refused it; a hand-edited store may still hold one
		}
		if conf.IsSecretRef(cc.Secret) || conf.IsSecretRef(cc.PublicKey) {
			continue // the master found no value: no token can be checked, none passes
		}
		key, err := cc.verifyKey()
		if err != nil {
			continue // a referenced secret or key whose value is not one
		}
		if _, taken := idx.byKey[cc.Key]; !taken { // the older consumer keeps a key two claim
			idx.byKey[cc.Key] = &credential{
				username: username,
				method:   jwt.GetSigningMethod(cc.Algorithm),
				key:      key,
				leeway:   cc.LifetimeGracePeriod,
			}
		}
	}
	return idx
}

// jwtAuth is one route's jwt-auth. It is immutable and safe for concurrent use.
type jwtAuth struct {
	header, query, cookie []byte
	hide                  bool
	keyClaim              string
	// verifyExp and verifyNbf: the claim must be present (required) or is checked when
	// present (!required).
	verifyExp, verifyNbf, required bool
	byKey                          map[string]*credential
	reject                         authn.Rejection
	parser                         *jwt.Parser
	now                            func() time.Time
}

var _ plugins.AccessPhase = (*jwtAuth)(nil)

// Build makes a route's jwt-auth over the snapshot's index (BuildSnapshot).
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	idx, ok := env.SnapshotState.(*index)
	if !ok {
		return nil, errNoIndex
	}
	j := &jwtAuth{
		header:   []byte(cfg.Header),
		query:    []byte(cfg.Query),
		cookie:   []byte(cfg.Cookie),
		hide:     cfg.HideCredentials,
		keyClaim: cfg.KeyClaimName,
		byKey:    idx.byKey,
		reject:   authn.NewRejection(`Bearer realm="`+cfg.Realm+`"`, cfg.AnonymousConsumer, idx.consumers),
		// The claims are checked here, as APISIX checks them, not by the library.
		parser: jwt.NewParser(jwt.WithoutClaimsValidation()),
		now:    time.Now,
	}
	if len(cfg.ClaimsToVerify) == 0 {
		j.verifyExp, j.verifyNbf = true, true
	} else {
		j.required = true
		for _, claim := range cfg.ClaimsToVerify {
			j.verifyExp = j.verifyExp || claim == "exp"
			j.verifyNbf = j.verifyNbf || claim == "nbf"
		}
	}
	return j, nil
}

// errNoIndex means Build ran without the snapshot's index: it is built through
// plugins.BuildInstance, which makes the index first.
var errNoIndex = errors.New("BUG: jwt-auth: built without the snapshot's index of keys")

var (
	headerCookie = []byte("Cookie")
	bearerUpper  = []byte("Bearer ")
	bearerLower  = []byte("bearer ")
)

// Access finds the token (header, query, cookie), its consumer by the key claim, and
// checks the algorithm, the signature and the claims, answering 401 with APISIX's
// message at the first that fails.
func (j *jwtAuth) Access(c *plugins.Ctx) error {
	token := j.token(c)
	if token == nil {
		j.fail(c, missingTokenBody)
		return nil
	}
	claims := jwt.MapClaims{}
	parsed, parts, err := j.parser.ParseUnverified(string(token), claims)
	// An alg the library does not know leaves the token parsed but unverifiable: as in
	// APISIX, it is refused below as not the consumer's algorithm.
	if err != nil && !errors.Is(err, jwt.ErrTokenUnverifiable) {
		j.fail(c, invalidTokenBody)
		return nil
	}
	keyClaim, present := claims[j.keyClaim]
	if !present || keyClaim == nil {
		j.fail(c, missingKeyBody)
		return nil
	}
	key, _ := keyClaim.(string)
	cred, ok := j.byKey[key]
	if !ok {
		j.fail(c, invalidKeyBody)
		return nil
	}
	// The token's alg must be the consumer's: an HS256 token signed with an RS256
	// consumer's public key as the secret is refused (t/plugin/jwt-auth.t TEST 52).
	if alg, _ := parsed.Header["alg"].(string); alg != cred.method.Alg() ||
		cred.method.Verify(strings.Join(parts[:2], "."), parsed.Signature, cred.key) != nil ||
		!j.claimsHold(claims, cred.leeway) {
		j.fail(c, failedBody)
		return nil
	}
	c.Consumer = cred.username
	return nil
}

// token returns the request's token, nil when there is none, and hides it when
// configured to (APISIX hides it as soon as it is found, valid or not).
func (j *jwtAuth) token(c *plugins.Ctx) []byte {
	if v := c.RequestHeader(j.header); v != nil {
		if j.hide {
			v = append([]byte(nil), v...) // the header's storage goes with it
			c.DelRequestHeader(j.header)
		}
		if bytes.HasPrefix(v, bearerUpper) || bytes.HasPrefix(v, bearerLower) {
			return v[len(bearerUpper):]
		}
		return v
	}
	if v := c.QueryArg(j.query); v != nil {
		if j.hide {
			v = append([]byte(nil), v...)
			c.DelQueryArg(j.query)
		}
		return v
	}
	v := c.Cookie(j.cookie)
	if v == nil {
		return nil
	}
	if j.hide {
		v = append([]byte(nil), v...)
		// Cookies are a header fasthttp keeps apart: setting it adds to what it holds, so
		// the old value goes first.
		kept := withoutCookie(c.RequestHeader(headerCookie), j.cookie)
		c.DelRequestHeader(headerCookie)
		if len(kept) > 0 {
			c.SetRequestHeader(headerCookie, kept)
		}
	}
	return v
}

// withoutCookie returns a Cookie header's value without the cookies named name, the rest
// joined by "; " as APISIX rebuilds it.
func withoutCookie(header, name []byte) []byte {
	var kept []byte
	for part := range bytes.SplitSeq(header, []byte(";")) {
		part = bytes.TrimSpace(part)
		n, _, _ := bytes.Cut(part, []byte("="))
		if len(part) == 0 || bytes.Equal(n, name) {
			continue
		}
		if len(kept) > 0 {
			kept = append(kept, "; "...)
		}
		kept = append(kept, part...)
	}
	return kept
}

// claimsHold checks exp and nbf as APISIX's parser does: with leeway seconds of grace,
// a claim that is not a number failing, one that is absent failing only when
// claims_to_verify names it.
func (j *jwtAuth) claimsHold(claims jwt.MapClaims, leeway int64) bool {
	now := float64(j.now().Unix())
	check := func(name string, holds func(float64) bool) bool {
		v, present := claims[name]
		if !present {
			return !j.required
		}
		n, isNumber := v.(float64)
		return isNumber && holds(n)
	}
	return (!j.verifyExp || check("exp", func(exp float64) bool { return exp > now-float64(leeway) })) &&
		(!j.verifyNbf || check("nbf", func(nbf float64) bool { return nbf < now+float64(leeway) }))
}

// fail answers 401 with body, or lets the request through as the anonymous consumer.
func (j *jwtAuth) fail(c *plugins.Ctx, body []byte) {
	j.reject.Reject(c, body)
}
