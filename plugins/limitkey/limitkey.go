// Package limitkey is the key of the limiting plugins that share state per client
// (limit-req, limit-conn): a variable or a combination of variables, read as APISIX reads
// it, hashed into a fingerprint for a keyed table in shared memory (shm.KeyedTable). It
// registers no plugin.
package limitkey

import (
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
	"gw/shm"
)

// Key is a key compiled: one variable (key_type var) or a template (var_combination).
type Key struct {
	single   bool
	v        conf.Var
	template conf.Template
}

// Parse reads key as keyType ("var" or "var_combination") says, refusing a variable gw
// cannot read; the error names the field "key". An empty var key is accepted, as APISIX
// accepts it, and never has a value: requests are limited by client address.
func Parse(keyType, text string) (Key, error) {
	var k Key
	var err error
	switch keyType {
	case "var":
		k.single = true
		if text != "" {
			k.v, err = conf.ParseVar(text)
		}
	case "var_combination":
		k.template, err = conf.ParseTemplate(text, conf.TemplateSyntax{})
	default:
		err = fmt.Errorf("key_type %q is not one of var, var_combination", keyType)
	}
	if err != nil {
		return Key{}, fmt.Errorf("key: %w", err)
	}
	return k, nil
}

// Source computes a request's fingerprint: a prefix (the route's, the configuration's)
// followed by the key's value. It is immutable and safe for concurrent use.
type Source struct {
	base shm.KeyHash // seeded and fed the prefix at build time
	key  Key
}

// NewSource makes the Source of key after base, a hash already fed the prefix.
func NewSource(base shm.KeyHash, key Key) *Source {
	return &Source{base: base, key: key}
}

// remoteAddr is the key when the configured one has no value.
var remoteAddr = conf.Var{Kind: conf.VarRemoteAddr}

// scratch holds any address or port, and most decoded arguments, on the stack.
const scratch = 128

// Fingerprint hashes the request's key without allocating, part by part for a
// var_combination. A key without a value, or with an empty one, is the client's address,
// as in APISIX ("The value of the configured key is empty, use client IP instead"); an
// empty value counts as none, as in limit-count, so that clients sending an empty header
// are not limited together.
func (s *Source) Fingerprint(c *plugins.Ctx) uint64 {
	r := c.VarsRequest()
	var buf [scratch]byte
	h := s.base
	if s.key.single {
		if v, ok := vars.HashValue(&r, &s.key.v, buf[:0]); ok && len(v) > 0 {
			h.Write(v)
			return h.Sum()
		}
	} else {
		resolved := false
		for i := range s.key.template.Parts {
			p := &s.key.template.Parts[i]
			v, ok := vars.PartHashValue(&r, p, buf[:0])
			h.Write(v)
			resolved = resolved || ok && len(v) > 0 && p.Kind == conf.PartVar
		}
		if resolved {
			return h.Sum()
		}
	}
	h = s.base
	v, _ := vars.HashValue(&r, &remoteAddr, buf[:0])
	h.Write(v)
	return h.Sum()
}

// Base is a table's hash fed the prefix APISIX keys a limit by: the configuration's
// owner (a global rule's id, or the route's) and the configuration itself, as text that
// must not change across binaries (so that state survives an upgrade): a changed limit
// opens fresh state, other edits of the route keep it.
func Base(table *shm.KeyedTable, env *plugins.Env, canonical string) shm.KeyHash {
	h := table.KeyHash()
	if env.GlobalRuleID != "" {
		h.WriteString("global_rule\x00")
		h.WriteString(env.GlobalRuleID)
	} else {
		h.WriteString("route\x00")
		if env.Route != nil {
			h.WriteString(env.Route.ID)
		}
	}
	h.WriteByte(0)
	h.WriteString(canonical)
	h.WriteByte(0)
	return h
}

// Append appends the request's key as text to dst, as Fingerprint reads it (the client's
// address when the key has no value), for a store that keys by text (Redis).
func (k *Key) Append(dst []byte, c *plugins.Ctx) []byte {
	r := c.VarsRequest()
	start := len(dst)
	if k.single {
		if out, ok := vars.Append(dst, &r, &k.v); ok && len(out) > start {
			return out
		}
	} else {
		resolved := false
		out := dst
		for i := range k.template.Parts {
			p := &k.template.Parts[i]
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
