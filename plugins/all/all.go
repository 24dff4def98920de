// Package all links every plugin into the binary; import it for its side effects.
package all

import (
	_ "gw/plugins/basicauth"
	_ "gw/plugins/forwardauth"
	_ "gw/plugins/keyauth"
	_ "gw/plugins/limitcount"
	_ "gw/plugins/prometheus"
	_ "gw/plugins/proxymirror"
	_ "gw/plugins/proxyrewrite"
	_ "gw/plugins/trafficsplit"
)
