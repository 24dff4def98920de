// Package proxyrewrite is APISIX's proxy-rewrite plugin (priority 1008): it changes the
// request before it is proxied, in the access phase, so the proxy sends ctx.Request as the
// chain left it. uri replaces the path (nginx variables such as $uri or $arg_id
// allowed), regex_uri substitutes the first match of the first matching [regex,
// replacement] pair in the decoded path ($1 and ${1} captures, Go's RE2 syntax), host
// replaces the Host header, method the method, and headers adds, sets and removes request
// headers (values may use the captures and variables; a value that comes out empty
// removes the header); they apply on top of the X-Forwarded-* gw sets, which the plugin
// takes over from the proxy (plugins.Ctx.TakeForwarded) when it names one.
// use_real_request_uri_unsafe starts from the client's target as sent. Templates are
// conf.Templates, expanded by gw/plugins/vars as every other user of variables does. As
// in APISIX the client's query string is kept (joined with '&' when the new uri has its
// own), and the new path is percent-encoded the way nginx's ngx_escape_uri does. Parse
// compiles every template and regex once; a request resolves them into pooled buffers
// and allocates nothing, except the one slice Go's regexp returns for a regex_uri match.
package proxyrewrite
