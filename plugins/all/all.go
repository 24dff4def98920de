// Package all links every plugin into the binary; import it for its side effects.
package all

import (
	_ "gw/plugins/limitcount"
	_ "gw/plugins/prometheus"
)
