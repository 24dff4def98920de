package keyauth

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

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

var indexes authn.Cache[*index]

func indexFor(snap *conf.Snapshot) *index { return indexes.For(snap, newIndex) }

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

func build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	var snap *conf.Snapshot
	if env != nil {
		snap = env.Snapshot
	}
	idx := indexFor(snap)
	return &keyAuth{
		header: []byte(cfg.Header),
		query:  []byte(cfg.Query),
		hide:   cfg.HideCredentials,
		byKey:  idx.byKey,
		reject: authn.NewRejection(`apikey realm="`+cfg.Realm+`"`, cfg.AnonymousConsumer, idx.consumers),
	}, nil
}

// Access looks the key up, header first, then the query argument. An empty value counts
// as missing.
func (k *keyAuth) Access(c *plugins.Ctx) bool {
	req := &c.Request.Request
	key := req.Header.PeekBytes(k.header)
	fromHeader := len(key) > 0
	var args *fasthttp.Args
	if !fromHeader {
		// A private parse: parsing the request's own QueryArgs would make fasthttp
		// re-encode the query string it sends upstream.
		args = fasthttp.AcquireArgs()
		args.ParseBytes(req.URI().QueryString())
		key = args.PeekBytes(k.query)
	}
	username, ok := k.byKey[string(key)] // no allocation: the compiler looks the bytes up
	if args != nil {
		fasthttp.ReleaseArgs(args)
	}
	switch {
	case len(key) == 0:
		return k.fail(c, missingKeyBody)
	case !ok:
		return k.fail(c, invalidKeyBody)
	}
	if k.hide {
		if fromHeader {
			req.Header.DelBytes(k.header)
		} else {
			req.URI().QueryArgs().DelBytes(k.query)
		}
	}
	c.Consumer = username
	return false
}

// fail answers 401 with body, or lets the request through as the anonymous consumer.
func (k *keyAuth) fail(c *plugins.Ctx, body []byte) bool {
	if k.reject.Reject(c, body) {
		return true
	}
	if k.hide {
		req := &c.Request.Request
		req.Header.DelBytes(k.header)
		if len(req.URI().QueryString()) > 0 {
			req.URI().QueryArgs().DelBytes(k.query)
		}
	}
	return false
}
