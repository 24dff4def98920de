// Package all links every plugin into the binary; import it for its side effects.
package all

import (
	_ "gw/plugins/apibreaker"
	_ "gw/plugins/basicauth"
	_ "gw/plugins/brotli"
	_ "gw/plugins/consumerrestriction"
	_ "gw/plugins/cors"
	_ "gw/plugins/faultinjection"
	_ "gw/plugins/forwardauth"
	_ "gw/plugins/gzip"
	_ "gw/plugins/httplogger"
	_ "gw/plugins/iprestriction"
	_ "gw/plugins/jwtauth"
	_ "gw/plugins/keyauth"
	_ "gw/plugins/limitconn"
	_ "gw/plugins/limitcount"
	_ "gw/plugins/limitreq"
	_ "gw/plugins/prometheus"
	_ "gw/plugins/proxymirror"
	_ "gw/plugins/proxyrewrite"
	_ "gw/plugins/realip"
	_ "gw/plugins/redirect"
	_ "gw/plugins/requestid"
	_ "gw/plugins/responserewrite"
	_ "gw/plugins/trafficsplit"
	_ "gw/plugins/uriblocker"
)
