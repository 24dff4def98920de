package basicauth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/authn"
)

// APISIX's 401 bodies (apisix/plugins/basic-auth.lua), as core.response.exit writes them;
// the third is authn.InvalidUserBody.
var (
	missingBody   = []byte(`{"message":"Missing authorization in request"}` + "\n")
	malformedBody = []byte(`{"message":"Invalid authorization in request"}` + "\n")
	authorization = []byte("Authorization")
)

// credentials is one consumer's basic-auth entry.
type credentials struct {
	consumer string
	// digest is SHA-256 of the password: comparing digests takes the same time whatever
	// the password's length and however much of it a guess gets right.
	digest [sha256.Size]byte
}

// index is one snapshot's consumers as basic-auth sees them, built once per snapshot and
// shared by every route's instance; it never changes after.
type index struct {
	byUsername map[string]*credentials
	consumers  map[string]bool
}

// BuildSnapshot indexes the snapshot's usernames once, for every route's instance.
func (plugin) BuildSnapshot(snap *conf.Snapshot, _ *plugins.Shared) (any, error) {
	return newIndex(snap), nil
}

var _ plugins.SnapshotBuilder = plugin{}

func newIndex(snap *conf.Snapshot) *index {
	idx := &index{byUsername: map[string]*credentials{}, consumers: authn.Usernames(snap)}
	for consumer, raw := range authn.Credentials(snap, Name) {
		cc, err := ParseConsumer(raw)
		if err != nil {
			continue // the Admin API refused it; a hand-edited store may still hold one
		}
		if conf.IsSecretRef(cc.Password) {
			// The master found no value for it: no password the client sends may match,
			// the reference's own text least of all.
			continue
		}
		if _, taken := idx.byUsername[cc.Username]; !taken { // the older consumer keeps it
			idx.byUsername[cc.Username] = &credentials{consumer: consumer, digest: sha256.Sum256([]byte(cc.Password))}
		}
	}
	return idx
}

// basicAuth is one route's basic-auth. It is immutable and safe for concurrent use.
type basicAuth struct {
	hide       bool
	byUsername map[string]*credentials
	reject     authn.Rejection
}

var _ plugins.AccessPhase = (*basicAuth)(nil)

// errNoIndex means Build ran without the snapshot's index: it is built through
// plugins.BuildInstance, which makes the index first.
var errNoIndex = errors.New("BUG: basic-auth: built without the snapshot's index of usernames")

// Build makes a route's basic-auth over the snapshot's index (BuildSnapshot).
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	idx, ok := env.SnapshotState.(*index)
	if !ok {
		return nil, errNoIndex
	}
	return &basicAuth{
		hide:       cfg.HideCredentials,
		byUsername: idx.byUsername,
		reject:     authn.NewRejection(`Basic realm="`+cfg.Realm+`"`, cfg.AnonymousConsumer, idx.consumers),
	}, nil
}

// maxDecoded bounds the credentials decoded on the stack; longer ones are refused as
// malformed (nginx's default header buffer would refuse most of them anyway).
const maxDecoded = 512

// Access checks the Authorization header's credentials against the consumers'.
func (b *basicAuth) Access(c *plugins.Ctx) error {
	header := c.RequestHeader(authorization)
	if len(header) == 0 {
		b.fail(c, missingBody)
		return nil
	}
	var buf [maxDecoded]byte
	username, password, ok := parseBasic(header, buf[:])
	if !ok {
		b.fail(c, malformedBody)
		return nil
	}
	cred := b.byUsername[string(username)]
	digest := sha256.Sum256(password)
	if cred == nil || subtle.ConstantTimeCompare(digest[:], cred.digest[:]) != 1 {
		b.fail(c, authn.InvalidUserBody)
		return nil
	}
	if b.hide {
		c.DelRequestHeader(authorization)
	}
	c.Consumer = cred.consumer
	return nil
}

// parseBasic reads "Basic <base64(user:password)>" into buf. Like APISIX it takes the
// first "basic" (any case) followed by white space, and removes white space from both
// parts; unlike APISIX (which splits at every ':' and keeps two pieces) the password is
// everything after the first ':', as RFC 7617 says.
func parseBasic(header, buf []byte) (username, password []byte, ok bool) {
	encoded, found := credentialsAfterScheme(header)
	if !found {
		return nil, nil, false
	}
	encoded = bytes.TrimRight(encoded, "=")
	if base64.RawStdEncoding.DecodedLen(len(encoded)) > len(buf) {
		return nil, nil, false
	}
	n, err := base64.RawStdEncoding.Decode(buf, encoded)
	if err != nil {
		return nil, nil, false
	}
	decoded := buf[:n]
	colon := bytes.IndexByte(decoded, ':')
	if colon < 0 {
		return nil, nil, false
	}
	return removeSpace(decoded[:colon]), removeSpace(decoded[colon+1:]), true
}

// credentialsAfterScheme finds APISIX's (?i:basic)\s(.+) in header.
func credentialsAfterScheme(header []byte) ([]byte, bool) {
	const scheme = "basic"
	for i := 0; i+len(scheme)+1 < len(header); i++ {
		if bytes.EqualFold(header[i:i+len(scheme)], []byte(scheme)) && isSpace(header[i+len(scheme)]) {
			return header[i+len(scheme)+1:], true
		}
	}
	return nil, false
}

// removeSpace deletes white space from b in place.
func removeSpace(b []byte) []byte {
	out := b[:0]
	for _, ch := range b {
		if !isSpace(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// isSpace is PCRE's \s.
func isSpace(ch byte) bool {
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'
}

// fail answers 401 with body, or lets the request through as the anonymous consumer.
func (b *basicAuth) fail(c *plugins.Ctx, body []byte) {
	if !b.reject.Reject(c, body) && b.hide {
		c.DelRequestHeader(authorization)
	}
}
