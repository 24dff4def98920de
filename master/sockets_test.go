package master

import (
	"fmt"
	"net"
	"testing"
)

// freeOnBoth finds a port free on 0.0.0.0 and [::] at once.
func freeOnBoth(t *testing.T) int {
	t.Helper()
	for range 50 {
		v6, err := net.Listen("tcp6", "[::]:0")
		if err != nil {
			t.Skipf("no IPv6: %v", err)
		}
		port := v6.Addr().(*net.TCPAddr).Port
		v4, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port))
		v6.Close()
		if err == nil {
			v4.Close()
			return port
		}
	}
	t.Fatal("no port free on both families")
	return 0
}

// [::]:p is IPv6 only, as nginx's ipv6only=on: 0.0.0.0:p may be opened beside it, in either
// order, for the data plane's slot sockets and for the master's own listeners alike.
func TestIPv6WildcardBesideIPv4Wildcard(t *testing.T) {
	for _, order := range [][2]string{{"0.0.0.0", "[::]"}, {"[::]", "0.0.0.0"}} {
		t.Run("slot sockets "+order[0]+" first", func(t *testing.T) {
			port := freeOnBoth(t)
			for _, host := range order {
				set, err := openSlotSockets(fmt.Sprintf("%s:%d", host, port), 2)
				if err != nil {
					t.Fatal(err)
				}
				defer set.close()
			}
			// Still a plain bind's "in use" for a second group on the same address.
			if _, err := openSlotSockets(fmt.Sprintf("[::]:%d", port), 1); err == nil {
				t.Fatal("a second [::] group joined the first")
			}
		})
		t.Run("listenStream "+order[0]+" first", func(t *testing.T) {
			port := freeOnBoth(t)
			for _, host := range order {
				ln, err := listenStream(fmt.Sprintf("%s:%d", host, port))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
			}
		})
	}
	// And a [::] listener does not answer IPv4.
	port := freeOnBoth(t)
	ln, err := listenStream(fmt.Sprintf("[::]:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Fatal("[::] accepted an IPv4 connection")
	}
}
