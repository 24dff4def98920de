package keyauth

import (
	"encoding/json"
	"errors"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/authn"
)

// APISIX's 401 bodies (apisix/plugins/key-auth.lua), as core.response.exit writes them.
var (
	missingKeyBody = []byte(`{"message":"Missing API key in request"}` + "\n")
	invalidKeyBody = []byte(`{"message":"Invalid API key in request"}` + "\n")
)

// index is one snapshot's consumers as key-auth sees them. It is built once per snapshot
// and shared by every route's instance; it never changes after.
type index struct {
	// byKey maps a key to its consumer's username.
	byKey map[string]string
	// consumers holds every consumer's username, for anonymous_consumer.
	consumers map[string]bool
}

// BuildSnapshot indexes the snapshot's keys once, for every route's instance.
func (plugin) BuildSnapshot(snap *conf.Snapshot, _ *plugins.Shared) (any, error) {
	return newIndex(snap), nil
}

var _ plugins.SnapshotBuilder = plugin{}

func newIndex(snap *conf.Snapshot) *index {
	idx := &index{byKey: map[string]string{}, consumers: authn.Usernames(snap)}
	for username, raw := range authn.Credentials(snap, Name) {
		cc, err := ParseConsumer(raw)
		if err != nil {
			continue // the Admin API refused it; a hand-edited store may still hold one
		}
		if conf.IsSecretRef(cc.Key) {
			// The master found no value for it: the key is unknown, and a client that
			// sends the reference's text must not be let in.
			continue
		}
		// The Admin API refuses a key already taken; should a store hold two anyway,
		// the older consumer keeps it.
		if _, taken := idx.byKey[cc.Key]; !taken {
			idx.byKey[cc.Key] = username
		}
	}
	return idx
}

// keyAuth is one route's key-auth. It is immutable and safe for concurrent use.
type keyAuth struct {
	header, query []byte
	hide          bool
	byKey         map[string]string
	reject        authn.Rejection
}

var (
	_ plugins.AccessPhase   = (*keyAuth)(nil)
	_ plugins.RequestKeeper = (*keyAuth)(nil)
)

// KeepsRequest: key-auth changes the request only to hide the key (hide_credentials), so
// its other routes keep sending the client's header block as it came.
func (k *keyAuth) KeepsRequest() bool { return !k.hide }

// Build makes a route's key-auth over the snapshot's index (BuildSnapshot).
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	idx, ok := env.SnapshotState.(*index)
	if !ok {
		return nil, errNoIndex
	}
	return &keyAuth{
		header: []byte(cfg.Header),
		query:  []byte(cfg.Query),
		hide:   cfg.HideCredentials,
		byKey:  idx.byKey,
		reject: authn.NewRejection(`apikey realm="`+cfg.Realm+`"`, cfg.AnonymousConsumer, idx.consumers),
	}, nil
}

// errNoIndex means Build ran without the snapshot's index: it is built through
// plugins.BuildInstance, which makes the index first.
var errNoIndex = errors.New("BUG: key-auth: built without the snapshot's index of keys")

// Access looks the key up, header first, then the query argument. An empty value counts
// as missing.
func (k *keyAuth) Access(c *plugins.Ctx) error {
	key := c.RequestHeader(k.header)
	fromHeader := len(key) > 0
	if !fromHeader {
		key = c.QueryArg(k.query)
	}
	username, ok := k.byKey[string(key)] // no allocation: the compiler looks the bytes up
	switch {
	case len(key) == 0:
		k.fail(c, missingKeyBody)
		return nil
	case !ok:
		k.fail(c, invalidKeyBody)
		return nil
	}
	if k.hide {
		if fromHeader {
			c.DelRequestHeader(k.header)
		} else {
			c.DelQueryArg(k.query)
		}
	}
	c.Consumer = username
	return nil
}

// fail answers 401 with body, or lets the request through as the anonymous consumer.
func (k *keyAuth) fail(c *plugins.Ctx, body []byte) {
	if k.reject.Reject(c, body) {
		return
	}
	if k.hide {
		c.DelRequestHeader(k.header)
		if len(c.QueryString()) > 0 {
			c.DelQueryArg(k.query)
		}
	}
}
