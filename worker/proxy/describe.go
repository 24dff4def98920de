package proxy

import (
	"fmt"
	"strings"
)

// String describes u as a build made it: its nodes with their weights and priorities, in
// order, and what else decides where a request goes. Two upstreams built from the same
// configuration read the same, so a test can tell an incremental build from a whole one
// by what it serves rather than by pointers.
func (u *Upstream) String() string {
	if u == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "balancer %d retries %d pass_host %d timeouts %v/%v/%v nodes", u.balancer, u.retries, u.passHost,
		u.connectTimeout, u.sendTimeout, u.readTimeout)
	for i := range u.nodes {
		n := &u.nodes[i]
		fmt.Fprintf(&b, " %s w%d p%d", n.addr, n.weight, n.priority)
	}
	if u.websocket {
		b.WriteString(" websocket")
	}
	if u.unusable != nil {
		fmt.Fprintf(&b, " unusable %q", u.unusable)
	}
	return b.String()
}
