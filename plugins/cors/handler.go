package cors

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"gw/plugins"
)

var (
	headerOrigin            = []byte("Origin")
	headerRequestHeaders    = []byte("Access-Control-Request-Headers")
	headerAllowOrigin       = []byte("Access-Control-Allow-Origin")
	headerAllowMethods      = []byte("Access-Control-Allow-Methods")
	headerAllowHeaders      = []byte("Access-Control-Allow-Headers")
	headerExposeHeaders     = []byte("Access-Control-Expose-Headers")
	headerMaxAge            = []byte("Access-Control-Max-Age")
	headerAllowCredentials  = []byte("Access-Control-Allow-Credentials")
	headerTimingAllowOrigin = []byte("Timing-Allow-Origin")
	headerVary              = []byte("Vary")
	valueOrigin             = []byte("Origin")
	valueTrue               = []byte("true")
	star                    = []byte("*")
	methodOptions           = []byte(http.MethodOptions)
	// everyMethod is what allow_methods "**" sends, as APISIX.
	everyMethod = []byte("GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE")
)

// origins is one compiled origin rule: allow_origins (or timing_allow_origins) and the
// regexes that replace it when given.
type origins struct {
	// any is "*": every request, with or without an Origin, gets "*".
	any bool
	// echo is "**": the request's Origin, or "*" without one.
	echo bool
	// exact is one origin ("http://a.com", "null") the request's must equal.
	exact []byte
	// list holds the origins of a comma-separated allow_origins.
	list map[string]struct{}
	// regex, when not nil, decides alone: an Origin it finds a match in is allowed.
	regex *regexp.Regexp
}

func compileOrigins(value string, regexes []string) origins {
	switch {
	case regexes != nil:
		// One alternation, as APISIX concatenates them with '|'; each compiled alone in
		// Parse, so the whole does too.
		return origins{regex: regexp.MustCompile("(?:" + strings.Join(regexes, ")|(?:") + ")")}
	case value == "*":
		return origins{any: true}
	case value == "**":
		return origins{echo: true}
	case strings.Contains(value, ","):
		list := map[string]struct{}{}
		for _, o := range strings.Split(value, ",") {
			list[o] = struct{}{}
		}
		return origins{list: list}
	}
	return origins{exact: []byte(value)}
}

// allow returns the value of the Allow-Origin header for a request from origin (nil when
// it sent none), and false when the origin is not allowed and no header is sent.
func (o *origins) allow(origin []byte) ([]byte, bool) {
	switch {
	case o.regex != nil:
		return origin, origin != nil && o.regex.Match(origin)
	case o.any:
		return star, true
	case o.echo:
		if origin == nil {
			return star, true
		}
		// APISIX splits the echoed origin at commas as it does a list, and the whole is
		// then never one of its parts.
		return origin, bytes.IndexByte(origin, ',') < 0
	case o.list != nil:
		_, ok := o.list[string(origin)]
		return origin, origin != nil && ok
	}
	return o.exact, bytes.Equal(origin, o.exact)
}

// cors is one route's cors. It is immutable and safe for concurrent use.
type cors struct {
	origins origins
	// byMetadata holds the plugin_metadata's origin lists allow_origins_by_metadata names
	// and the metadata has, in its order; nil without allow_origins_by_metadata.
	byMetadata      []origins
	timing          *origins // nil without timing_allow_origins
	vary            bool     // allow_origins is not "*": the answer depends on Origin
	methods         []byte
	headers         []byte
	echoHeaders     bool // allow_headers "**": the request's Access-Control-Request-Headers
	expose          []byte
	maxAge          []byte
	allowCredential bool
}

var (
	_ plugins.AccessPhase   = (*cors)(nil)
	_ plugins.RequestKeeper = plugin{}
	_ plugins.MetadataOwner = plugin{}
)

// ValidateMetadata checks cors's plugin_metadata (ParseMetadata).
func (plugin) ValidateMetadata(raw json.RawMessage) error {
	_, err := ParseMetadata(raw)
	return err
}

// MetadataSchema is the plugin_metadata's JSON Schema.
func (plugin) MetadataSchema() []byte { return metadataSchema }

// KeepsRequest: cors only answers (an OPTIONS) and adds response headers.
func (plugin) KeepsRequest() bool { return true }

// Build compiles a route's cors.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	h := &cors{
		origins:         compileOrigins(cfg.AllowOrigins, cfg.AllowOriginsByRegex),
		vary:            cfg.AllowOrigins != "*",
		methods:         []byte(cfg.AllowMethods),
		headers:         []byte(cfg.AllowHeaders),
		echoHeaders:     cfg.AllowHeaders == "**",
		expose:          []byte(cfg.ExposeHeaders),
		maxAge:          strconv.AppendInt(nil, cfg.MaxAge, 10),
		allowCredential: cfg.AllowCredential,
	}
	if cfg.AllowOriginsByMetadata != nil {
		h.byMetadata = []origins{}
		if env != nil && env.Metadata != nil {
			md, err := ParseMetadata(env.Metadata)
			if err != nil {
				return nil, err
			}
			for _, key := range cfg.AllowOriginsByMetadata {
				if value, ok := md.AllowOrigins[key]; ok {
					h.byMetadata = append(h.byMetadata, compileOrigins(value, nil))
				}
			}
		}
	}
	if cfg.AllowMethods == "**" {
		h.methods = everyMethod
	}
	if cfg.TimingAllowOrigins != "" || cfg.TimingAllowOriginsByRegex != nil {
		t := compileOrigins(cfg.TimingAllowOrigins, cfg.TimingAllowOriginsByRegex)
		h.timing = &t
	}
	return h, nil
}

// allowOrigin decides Access-Control-Allow-Origin as APISIX's header_filter does: an
// Origin one of the metadata's named lists allows (the list's answer being that Origin or
// "*") is echoed; failing that, allow_origins (or its regexes) decides, unless it is the
// default "*", which allow_origins_by_metadata then leaves out.
func (h *cors) allowOrigin(origin []byte) ([]byte, bool) {
	if h.byMetadata != nil {
		for i := range h.byMetadata {
			if allowed, ok := h.byMetadata[i].allow(origin); ok && origin != nil && (isStar(allowed) || bytes.Equal(allowed, origin)) {
				return origin, true
			}
		}
		if !h.vary {
			return nil, false
		}
	}
	return h.origins.allow(origin)
}

func isStar(b []byte) bool { return len(b) == 1 && b[0] == '*' }

// Access queues the CORS headers for whatever answer the request gets, and answers an
// OPTIONS request 200 with no body, as APISIX's rewrite phase does: the browser's
// preflight never reaches the upstream, nor the auth plugins after cors.
func (h *cors) Access(c *plugins.Ctx) error {
	origin := c.RequestHeader(headerOrigin)
	if h.vary {
		c.AppendResponseHeader(headerVary, valueOrigin)
	}
	if allowed, ok := h.allowOrigin(origin); ok {
		c.AddResponseHeader(headerAllowOrigin, allowed)
		c.AddResponseHeader(headerAllowMethods, h.methods)
		c.AddResponseHeader(headerMaxAge, h.maxAge)
		if len(h.expose) > 0 {
			c.AddResponseHeader(headerExposeHeaders, h.expose)
		}
		switch {
		case !h.echoHeaders:
			c.AddResponseHeader(headerAllowHeaders, h.headers)
		case c.RequestHeader(headerRequestHeaders) != nil:
			c.AddResponseHeader(headerAllowHeaders, c.RequestHeader(headerRequestHeaders))
		}
		if h.allowCredential {
			c.AddResponseHeader(headerAllowCredentials, valueTrue)
		}
	}
	if h.timing != nil {
		// APISIX sends it only when the request's Origin is the one allowed, or "*".
		if allowed, ok := h.timing.allow(origin); ok && (isStar(allowed) || bytes.Equal(allowed, origin)) {
			c.AddResponseHeader(headerTimingAllowOrigin, allowed)
		}
	}
	if bytes.Equal(c.Method(), methodOptions) {
		c.Respond(http.StatusOK, nil, nil)
	}
	return nil
}
