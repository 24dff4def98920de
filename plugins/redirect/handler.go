package redirect

import (
	"bytes"
	"encoding/json"
	"sync"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
)

// Redirect is one route's instance: its Config and, for http_to_https, the Location
// template with the port of gw's TLS listener.
type Redirect struct {
	*Config
	https conf.Template
}

// Build compiles a route's configuration against the worker's TLS listener.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	r := &Redirect{Config: c}
	if c.HTTPToHTTPS {
		var cfg *conf.Config
		if env != nil && env.Shared != nil {
			cfg = env.Shared.Config
		}
		r.https = httpsTemplate(tlsPort(cfg))
	}
	return r, nil
}

var (
	_ plugins.AccessPhase   = (*Redirect)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: redirect answers a request or lets it through unchanged.
func (plugin) KeepsRequest() bool { return true }

// state is one request's scratch space, pooled so that Access does not allocate.
type state struct {
	location, path, escaped []byte
}

var states = sync.Pool{New: func() any { return new(state) }}

var (
	locationHeader = []byte("Location")
	forwardedProto = []byte("X-Forwarded-Proto")
	https          = []byte("https")
	get, head      = []byte("GET"), []byte("HEAD")
)

// Access answers RetCode with a Location, as APISIX's redirect does.
func (rd *Redirect) Access(pc *plugins.Ctx) error {
	st := states.Get().(*state)
	defer states.Put(st)
	r := pc.VarsRequest()
	code := rd.RetCode
	switch {
	case rd.HTTPToHTTPS:
		scheme := pc.RequestHeader(forwardedProto)
		if scheme == nil {
			scheme = schemeOf(pc)
		}
		if bytes.Equal(scheme, https) {
			return nil
		}
		st.location, _ = vars.Expand(st.location[:0], &r, &rd.https)
		code = 308
		if m := pc.Method(); bytes.Equal(m, get) || bytes.Equal(m, head) {
			code = 301
		}
	case rd.URI != nil:
		st.location, _ = vars.Expand(st.location[:0], &r, rd.URI)
	default:
		path := pc.Path() // nginx's $uri: decoded and normalised
		match := rd.Regex.FindSubmatchIndex(path)
		if match == nil {
			return nil
		}
		st.location = append(st.location[:0], path[:match[0]]...)
		for _, p := range rd.Replacement {
			if p.capture < 0 {
				st.location = append(st.location, p.text...)
			} else if i := 2 * p.capture; match[i] >= 0 {
				st.location = append(st.location, path[match[i]:match[i+1]]...)
			}
		}
		st.location = append(st.location, path[match[1]:]...)
	}
	query := bytes.IndexByte(st.location, '?')
	if rd.EncodeURI {
		end := len(st.location)
		if query >= 0 {
			end = query
		}
		st.escaped = appendEscapedURI(st.escaped[:0], st.location[:end])
		st.escaped = append(st.escaped, st.location[end:]...)
		st.location, st.escaped = st.escaped, st.location
	}
	if rd.AppendQueryString {
		if args := pc.QueryString(); len(args) > 0 {
			if query >= 0 {
				st.location = append(st.location, '&')
			} else {
				st.location = append(st.location, '?')
			}
			st.location = append(st.location, args...)
		}
	}
	// A control character (a decoded %0D%0A from the path or an argument) would end the
	// header line: it goes percent-encoded whatever encode_uri says.
	st.escaped = appendControlEscaped(st.escaped[:0], st.location)
	pc.AddResponseHeader(locationHeader, st.escaped)
	pc.Respond(code, nil, nil)
	return nil
}

var schemeHTTP = []byte("http")

func schemeOf(pc *plugins.Ctx) []byte {
	if pc.IsTLS() {
		return https
	}
	return schemeHTTP
}

const upperHex = "0123456789ABCDEF"

// appendEscapedURI is nginx's ngx_escape_uri with NGX_ESCAPE_URI, APISIX's
// uri_safe_encode: controls, space, '#', '%', '?', DEL and every byte above it.
func appendEscapedURI(dst, s []byte) []byte {
	for _, c := range s {
		if c <= 0x20 || c == '#' || c == '%' || c == '?' || c >= 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

func appendControlEscaped(dst, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}
