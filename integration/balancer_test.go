package integration

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Balancers through real workers: weights honoured over 400 requests, and chash sending a
// key to the same node whichever of two workers proxies it.

// countingNode is an upstream that answers with its name and records, per request, the
// value of one header and the TCP port the request came from (a worker's pooled
// connection, which tells the workers apart).
type countingNode struct {
	name string
	addr string
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	key  string
	port int
}

func startCountingNode(t *testing.T, name, keyHeader string) *countingNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &countingNode{name: name, addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(r.RemoteAddr)
		p, _ := strconv.Atoi(port)
		n.mu.Lock()
		n.seen = append(n.seen, seenRequest{key: r.Header.Get(keyHeader), port: p})
		n.mu.Unlock()
		io.WriteString(w, name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return n
}

func (n *countingNode) requests() []seenRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]seenRequest(nil), n.seen...)
}

func TestWeightsHonouredAcrossWorkers(t *testing.T) {
	weights := []int{1, 2, 5}
	var nodes []*countingNode
	var members []string
	for i, w := range weights {
		n := startCountingNode(t, "n"+strconv.Itoa(i), "X-Unused")
		nodes = append(nodes, n)
		members = append(members, fmt.Sprintf("%q: %d", n.addr, w))
	}
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/upstreams/w", `{"type":"roundrobin","nodes":{`+strings.Join(members, ",")+`}}`)
	in.mustPut("/apisix/admin/routes/w", `{"uri":"/w","upstream_id":"w"}`)

	const total = 400
	for range total {
		if resp, body := in.get("/w"); resp.StatusCode != 200 {
			t.Fatalf("GET /w: %d %s", resp.StatusCode, body)
		}
	}
	sum := 0
	for _, w := range weights {
		sum += w
	}
	workers := map[int]bool{}
	owners := socketOwners(t, children(in.masterPID()))
	for i, n := range nodes {
		seen := n.requests()
		want := float64(total*weights[i]) / float64(sum)
		if got := float64(len(seen)); math.Abs(got-want) > 0.1*want {
			t.Errorf("node of weight %d got %d of %d requests, want %.0f ± 10%%", weights[i], len(seen), total, want)
		}
		for _, r := range seen {
			workers[owners[r.port]] = true
		}
	}
	delete(workers, 0)
	if len(workers) != 2 {
		t.Errorf("requests came from workers %v, want both", workers)
	}
}

func TestChashStickyAcrossWorkers(t *testing.T) {
	var nodes []*countingNode
	var members []string
	for i := range 3 {
		n := startCountingNode(t, "n"+strconv.Itoa(i), "X-User")
		nodes = append(nodes, n)
		members = append(members, fmt.Sprintf("%q: 1", n.addr))
	}
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/c", `{"uri":"/c","upstream":{"type":"chash","hash_on":"header","key":"X-User",`+
		`"nodes":{`+strings.Join(members, ",")+`}}}`)

	const users, rounds = 24, 8
	nodeOf := map[string]string{}
	for round := range rounds {
		for u := range users {
			user := "user-" + strconv.Itoa(u)
			// A fresh connection each time, so the kernel spreads them over both workers.
			resp, body := in.get("/c", "X-User", user)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /c: %d %s", resp.StatusCode, body)
			}
			if round == 0 {
				nodeOf[user] = body
			} else if body != nodeOf[user] {
				t.Errorf("%s went to %s, earlier to %s", user, body, nodeOf[user])
			}
		}
	}
	used := map[string]bool{}
	for _, n := range nodeOf {
		used[n] = true
	}
	if len(used) < 2 {
		t.Errorf("%d users all hashed to %v; the test proves little", users, used)
	}
	// Each user's requests came through both workers, and still reached one node.
	owners := socketOwners(t, children(in.masterPID()))
	workersOf := map[string]map[int]bool{}
	for _, n := range nodes {
		for _, r := range n.requests() {
			if workersOf[r.key] == nil {
				workersOf[r.key] = map[int]bool{}
			}
			if pid := owners[r.port]; pid != 0 {
				workersOf[r.key][pid] = true
			}
		}
	}
	both := 0
	for _, ws := range workersOf {
		if len(ws) == 2 {
			both++
		}
	}
	if both < users/2 {
		t.Errorf("only %d of %d users were served by both workers", both, users)
	}
}

func TestChashOnConsumerAcrossWorkers(t *testing.T) {
	var members []string
	for i := range 3 {
		n := startCountingNode(t, "n"+strconv.Itoa(i), "X-Unused")
		members = append(members, fmt.Sprintf("%q: 1", n.addr))
	}
	in := newInstance(t, "")
	in.start("--workers", "2")
	consumers := []string{"ann", "bob", "cat", "dan", "eve", "fay"}
	for _, c := range consumers {
		in.mustPut("/apisix/admin/consumers", fmt.Sprintf(`{"username":%q,"plugins":{"key-auth":{"key":"key-%s"}}}`, c, c))
	}
	in.mustPut("/apisix/admin/routes/k", `{"uri":"/k","plugins":{"key-auth":{}},"upstream":{"type":"chash","hash_on":"consumer",`+
		`"nodes":{`+strings.Join(members, ",")+`}}}`)
	used := map[string]bool{}
	for _, c := range consumers {
		first := ""
		for range 10 {
			resp, body := in.get("/k", "apikey", "key-"+c)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /k as %s: %d %s", c, resp.StatusCode, body)
			}
			if first == "" {
				first = body
			} else if body != first {
				t.Errorf("consumer %s went to %s, earlier to %s", c, body, first)
			}
		}
		used[first] = true
	}
	if len(used) < 2 {
		t.Errorf("%d consumers all hashed to %v; hash_on consumer looks ignored", len(consumers), used)
	}
}

// socketOwners maps the local port of every TCP socket the processes pids hold to the pid
// that holds it, from /proc.
func socketOwners(t *testing.T, pids []int) map[int]int {
	t.Helper()
	inodeOwner := map[string]int{}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("listing the sockets of worker %d: %v", pid, err)
		}
		for _, e := range entries {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
				inodeOwner[strings.TrimSuffix(inode, "]")] = pid
			}
		}
	}
	owners := map[int]int{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			_, portHex, ok := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(portHex, 16, 32)
			if pid, found := inodeOwner[fields[9]]; ok && err == nil && found {
				owners[int(port)] = pid
			}
		}
		f.Close()
	}
	return owners
}

// APISIX's t/admin/upstream-array-nodes.t and t/admin/upstream2.t, TEST 6-8: an upstream
// with empty nodes is accepted, a route may use it, and a request down that route gets
// 503 ("no valid upstream node"), not 502: no node was tried. Weights all 0 leave none to
// try either. Through two real workers, each of which must answer so.
func TestUpstreamWithNoNodeToTryAnswers503(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "2")
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for id, body := range map[string]string{
		"map":   `{"type":"roundrobin","nodes":{}}`,
		"array": `{"type":"roundrobin","nodes":[]}`,
		"zero":  `{"type":"roundrobin","nodes":{"` + dead + `":0,"127.0.0.2:1":0}}`,
	} {
		in.mustPut("/apisix/admin/upstreams/"+id, body)
		in.mustPut("/apisix/admin/routes/"+id, `{"methods":["GET"],"uri":"/`+id+`","upstream_id":"`+id+`"}`)
		for range 4 {
			resp, got := in.get("/" + id)
			if want := `{"error_msg":"503 Service Unavailable: no valid upstream node"}`; resp.StatusCode != 503 || got != want {
				t.Fatalf("GET /%s: %d %s, want 503 %s", id, resp.StatusCode, got, want)
			}
		}
	}
}

// APISIX's t/admin/upstream.t TEST 23 "verify wrong Ipv6": a node host that is an IPv6
// address without brackets is a 400 in APISIX's words, and nothing is stored.
func TestUpstreamIPv6HostNeedsBrackets(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	for _, body := range []string{
		`{"type":"roundrobin","nodes":[{"host":"::1","port":80,"weight":1}]}`,
		`{"type":"roundrobin","nodes":{"::1:80":1}}`,
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/upstreams/v6", body)
		if status != 400 || !strings.Contains(resp, `IPv6 address must be enclosed with '[' and ']'`) {
			t.Errorf("PUT %s: %d %s, want 400 naming the brackets", body, status, resp)
		}
	}
	if status, resp := in.adminCall("GET", "/apisix/admin/upstreams/v6", ""); status != 404 {
		t.Errorf("GET after refused PUTs: %d %s, want 404", status, resp)
	}
	in.mustPut("/apisix/admin/upstreams/v6", `{"type":"roundrobin","nodes":[{"host":"[::1]","port":80,"weight":1}]}`)
	if status, resp := in.adminCall("GET", "/apisix/admin/upstreams/v6", ""); status != 200 || !strings.Contains(resp, `"host":"[::1]"`) {
		t.Errorf("GET: %d %s, want the host as written", status, resp)
	}
}
