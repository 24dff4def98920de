// Package vars reads nginx and APISIX variables ($uri, $arg_page, $http_x_user,
// $route_id...) from a request: the one resolver behind route vars (worker/router), chash
// keys (worker/proxy), proxy-rewrite's templates and limit-count's keys, and the one that
// later users (a logger's log_format, traffic-split's matches, response-rewrite) call.
//
// Parsing and reading are split on purpose. A variable is parsed once, when its object is
// validated, by conf.ParseVar (and templates by conf.ParseTemplate) from conf's one list
// of supported variables: conf imports no gw package, so the Admin API, the workers and
// every plugin can validate with it. Reading needs fasthttp and the state of one request
// (the matched route, the consumer), which conf must not know, so it lives here. This
// package imports conf and fasthttp alone, not gw/plugins: worker/router, which runs before
// any plugin, imports it without the plugin runtime, and the plugin contract itself may
// import it (a Ctx method, a log phase) without a cycle. A caller describes its request
// with a Request value, built on its stack.
//
// Reading allocates nothing. A value the request holds (a header, the path) is returned
// as it is, pointing into the request; a value that has to be made (an address, a port, a
// lower-cased host, a decoded argument) is appended to a buffer the caller passes. Reading
// never changes the request: query arguments and cookies are scanned in place, because
// fasthttp's own parsers would have the proxy re-encode the query string and rewrite the
// Cookie headers it sends upstream. The one exception is the body (body.go): post_arg
// reads the streamed body whole, once, and leaves it to the request as the bytes read,
// which the proxy sends unchanged.
package vars
