// Package faultinjection is APISIX's fault-injection plugin (priority 11000): it makes a
// route fail on purpose, to test its clients. abort answers the request itself with
// http_status, body and headers (variables allowed, as $remote_addr); delay holds the
// request for duration seconds before the rest of the chain runs. Each applies to a
// percentage of requests, and given vars (lua-resty-expr expressions, one of which must
// hold, evaluated by plugins/vars as route vars are) to the requests they match. A delay
// sleeps in the request's own goroutine, which parks it without holding the worker's
// processor.
package faultinjection
