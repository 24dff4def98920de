package limitcount

import (
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
	"gw/shm"
)

// key is a limit-count key compiled: one variable (key_type var) or a template
// (var_combination); a constant key is hashed once and needs neither.
type key struct {
	single   bool
	v        conf.Var
	template conf.Template
}

// parseKey reads key as key_type says, refusing a variable gw cannot read. An empty var
// key is accepted, as APISIX accepts it, and never has a value: requests count by
// client address.
func parseKey(keyType, text string) (key, error) {
	var k key
	var err error
	switch keyType {
	case "var":
		k.single = true
		if text != "" {
			k.v, err = conf.ParseVar(text)
		}
	case "var_combination":
		k.template, err = conf.ParseTemplate(text, conf.TemplateSyntax{})
	}
	if err != nil {
		return key{}, fmt.Errorf("key: %w", err)
	}
	return k, nil
}

// keySource computes a request's counter fingerprint: the route's prefix (or the group's)
// followed by the key's value.
type keySource struct {
	base     shm.KeyHash // seeded and fed the prefix at build time
	constant bool
	fp       uint64 // the whole fingerprint when constant
	key      key
	// names is set when the key reads the route's, service's or consumer's names.
	names bool
}

// remoteAddr is the key when the configured one has no value.
var remoteAddr = conf.Var{Kind: conf.VarRemoteAddr}

func newKeySource(base shm.KeyHash, cfg *Config) (*keySource, error) {
	ks := &keySource{base: base}
	if cfg.KeyType == "constant" {
		ks.constant = true
		h := base
		h.WriteString(cfg.Key)
		ks.fp = h.Sum()
		return ks, nil
	}
	var err error
	ks.key, err = parseKey(cfg.KeyType, cfg.Key)
	ks.names = vars.ReadsNames(&ks.key.v)
	for i := range ks.key.template.Parts {
		ks.names = ks.names || vars.ReadsNames(&ks.key.template.Parts[i].Var)
	}
	return ks, err
}

// keyScratch holds any address or port, and most decoded arguments, on the stack.
const keyScratch = 128

// fingerprint hashes the request's key without allocating. A var_combination key is
// hashed part by part, so a long value needs no buffer; addresses and ports are hashed in
// their binary form (vars.HashValue), as limit-count always has, so that counters keep
// their keys across an upgrade.
func (ks *keySource) fingerprint(c *plugins.Ctx) uint64 {
	if ks.constant {
		return ks.fp
	}
	r := vars.Request{HTTP: c.Request}
	if ks.names {
		r.Consumer = c.Consumer
		if route := c.Route; route != nil {
			r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
		}
	}
	var scratch [keyScratch]byte
	h := ks.base
	// An empty value counts as none, unlike in APISIX: one counter for every client
	// sending an empty header would limit them all together.
	if ks.key.single {
		if v, ok := vars.HashValue(&r, &ks.key.v, scratch[:0]); ok && len(v) > 0 {
			h.Write(v)
			return h.Sum()
		}
	} else {
		resolved := false
		for i := range ks.key.template.Parts {
			p := &ks.key.template.Parts[i]
			v, ok := vars.PartHashValue(&r, p, scratch[:0])
			h.Write(v)
			resolved = resolved || ok && len(v) > 0 && p.Kind == conf.PartVar
		}
		if resolved {
			return h.Sum()
		}
	}
	// APISIX: "The value of the configured key is empty, use client IP instead".
	h = ks.base
	v, _ := vars.HashValue(&r, &remoteAddr, scratch[:0])
	h.Write(v)
	return h.Sum()
}

// textKey is the request's key value as text, as APISIX puts it into the Redis key (the
// local policy hashes binary addresses instead, keySource). Its rule for a missing or
// empty value is keySource's.
type textKey struct {
	constant string
	isConst  bool
	key      key
	names    bool
}

func newTextKey(cfg *Config) (textKey, error) {
	if cfg.KeyType == "constant" {
		return textKey{constant: cfg.Key, isConst: true}, nil
	}
	k, err := parseKey(cfg.KeyType, cfg.Key)
	t := textKey{key: k, names: vars.ReadsNames(&k.v)}
	for i := range k.template.Parts {
		t.names = t.names || vars.ReadsNames(&k.template.Parts[i].Var)
	}
	return t, err
}

func (t *textKey) append(dst []byte, c *plugins.Ctx) []byte {
	if t.isConst {
		return append(dst, t.constant...)
	}
	r := vars.Request{HTTP: c.Request}
	if t.names {
		r.Consumer = c.Consumer
		if route := c.Route; route != nil {
			r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
		}
	}
	start := len(dst)
	if t.key.single {
		if out, ok := vars.Append(dst, &r, &t.key.v); ok && len(out) > start {
			return out
		}
	} else {
		resolved := false
		out := dst
		for i := range t.key.template.Parts {
			p := &t.key.template.Parts[i]
			before := len(out)
			var ok bool
			out, ok = vars.AppendPart(out, &r, p)
			resolved = resolved || ok && len(out) > before && p.Kind == conf.PartVar
		}
		if resolved {
			return out
		}
	}
	out, _ := vars.Append(dst[:start], &r, &remoteAddr)
	return out
}
