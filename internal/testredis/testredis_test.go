package testredis

import (
	"net"
	"testing"
)

// A port taken between picking it and redis-server's bind costs a retry, not the test.
func TestStartRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	pick := func(t testing.TB) int {
		picks++
		if picks == 1 {
			return taken.Addr().(*net.TCPAddr).Port
		}
		return freePort(t)
	}
	s := start(t, pick, nil)
	if reply, err := s.Do("PING"); err != nil || reply != "PONG" || picks != 2 {
		t.Errorf("PING: %q %v after %d picks; want PONG after 2", reply, err, picks)
	}
}
