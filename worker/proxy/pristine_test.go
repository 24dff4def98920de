package proxy

import "testing"

func TestDroppedHeader(t *testing.T) {
	for _, name := range []string{"te", "TE", "Host", "hOST", "Trailer", "upgrade", "X-Real-IP", "x-real-ip",
		"Connection", "KEEP-ALIVE", "X-Forwarded-For", "x-forwarded-host", "X-Forwarded-Port", "proxy-connection",
		"X-Forwarded-Proto", "Transfer-Encoding", "Proxy-Authenticate", "proxy-authorization"} {
		if !droppedHeader([]byte(name)) {
			t.Errorf("%q is kept, want dropped", name)
		}
	}
	for _, name := range []string{"", "T", "Tf", "Hostx", "Accept", "X-Forwarded-Fox", "X_Forwarded_For",
		"X-Real-IQ", "Content-Length", "Cookie", "User-Agent", "Upgrade-Insecure-Requests", "Keep-Alivf"} {
		if droppedHeader([]byte(name)) {
			t.Errorf("%q is dropped, want kept", name)
		}
	}
}

func TestHeaderLines(t *testing.T) {
	raw := "Host: a\r\nX-A:  1 \r\nX-B:\r\nX-Tab:\t2 3\t \r\nX-Blank: \t \r\n\r\nX-After: no\r\n"
	var got []string
	for name, value := range headerLines([]byte(raw)) {
		got = append(got, string(name)+"="+string(value))
	}
	want := []string{"Host=a", "X-A=1", "X-B=", "X-Tab=2 3", "X-Blank="}
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lines %q, want %q", got, want)
		}
	}
}

func TestListedIn(t *testing.T) {
	list := []byte("keep-alive, X-Client-Hop ,host,Content-Length,")
	for name, want := range map[string]bool{"X-Client-Hop": true, "x-client-hop": true, "Keep-Alive": true,
		"Host": false, "content-length": false, "X-Other": false} {
		if got := listedIn(list, []byte(name)); got != want {
			t.Errorf("listedIn(%q) = %v, want %v", name, got, want)
		}
	}
}
