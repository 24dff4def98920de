package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"gw/conf"
	"gw/master/store"
)

// sslSecretFields are the ssl fields the Admin API never returns: the private keys. APISIX
// 3 drops them from GET answers too; it echoes them (encrypted) in write answers, which
// gw, storing them unencrypted, does not.
var sslSecretFields = []string{"key", "keys"}

// sslResource is APISIX's ssls collection: every method, the pairs checked with their
// keys, and no SNI served by two ssls. An ssl of type client that an upstream presents
// (tls.client_cert_id) is deleted only with ?force=true, as an upstream a route uses.
var sslResource = &resource{
	kind:     store.SSLs,
	singular: "ssl",
	validate: func(value []byte) error {
		// $env:// references are resolved from the master's environment, as workers will
		// get them (master/secrets.go); the store keeps them as written.
		_, err := conf.DecodeSSL(value, os.LookupEnv)
		return err
	},
	inUse:     "can not delete this ssl",
	conflicts: sniTaken,
	hidden:    sslSecretFields,
}

// sniTaken refuses an ssl that would serve a name another served ssl already serves:
// which certificate a client got would depend on order, and one tenant could take
// another's name. A standby ssl with status 0 may share names; enabling it is refused
// until the other one lets go.
func sniTaken(s *store.Store, value []byte) error {
	mine, err := conf.DecodeStoredSSL(value)
	if err != nil || !mine.Serves() {
		return err
	}
	names := map[string]bool{}
	for _, n := range mine.Names() {
		names[n] = true
	}
	for _, obj := range s.List(store.SSLs) {
		if obj.ID == string(mine.ID) {
			continue
		}
		other, err := conf.DecodeStoredSSL(obj.Value)
		if err != nil || !other.Serves() {
			continue
		}
		for _, n := range other.Names() {
			if names[n] {
				return fmt.Errorf("invalid configuration: sni %q is already served by ssl %s; "+
					"remove it there first, or replace that ssl's certificate instead", n, obj.ID)
			}
		}
	}
	return nil
}

// withoutFields returns value, a JSON object, without the named top-level fields. The
// rest keeps its bytes and order. A value that is not an object is returned as it is.
func withoutFields(value json.RawMessage, fields []string) json.RawMessage {
	if len(fields) == 0 {
		return value
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return value
	}
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return value
		}
		name, _ := tok.(string)
		var member json.RawMessage
		if err := dec.Decode(&member); err != nil {
			return value
		}
		if contains(fields, name) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		quoted, _ := json.Marshal(name)
		out.Write(quoted)
		out.WriteByte(':')
		out.Write(member)
	}
	out.WriteByte('}')
	return out.Bytes()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// shown is what the Admin API returns of a stored value: all but the resource's hidden
// fields.
func (res *resource) shown(value json.RawMessage) json.RawMessage {
	return withoutFields(value, res.hidden)
}

// shownItem is it with its value as shown.
func (res *resource) shownItem(it item) item {
	it.Value = res.shown(it.Value)
	return it
}

// shownRejection drops the echo of a malformed body ("req_body") for a resource with
// hidden fields: the body may hold a private key.
func (res *resource) shownRejection(bad *rejection) *rejection {
	if bad == nil || len(res.hidden) == 0 {
		return bad
	}
	if body, ok := bad.body.(errorBody); ok && body.ReqBody != "" {
		body.ReqBody = ""
		return &rejection{status: bad.status, body: body}
	}
	return bad
}
