package bytesconv

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unsafeUsers are the files of the module that may import unsafe, and why each must. A
// view of a string as bytes or back belongs in this package instead.
var unsafeUsers = map[string]string{
	"internal/bytesconv/bytesconv.go": "the string and byte views themselves",
	"internal/rawio/rawio.go":         "read(2) and write(2) made raw take the buffer's address as a system call argument",
	"internal/rawio/inq.go":           "recvmsg(2) takes the address of its msghdr, and TCP_INQ's count comes back in a control message to decode in place",
	"internal/rawio/poll.go":          "the runtime's poll descriptor is read out of net's netFD, which no API exposes (checked against the descriptor at start)",
	"internal/rawio/socket.go":        "accept4(2) writes the peer's address into a sockaddr given by address, decoded in place; the listener's poll descriptor is read out of net's netFD as poll.go does; the runtime's poller is reached by linkname",
	"internal/rawio/dial.go":          "connect(2), getsockname(2), getsockopt(2) and setsockopt(2) made raw take a sockaddr or an int by address, built and compared in place",
	"internal/rawio/listener.go":      "a listener from net.FileListener keeps keep-alive on, and its ListenConfig, found by name and type, is written through its address",
	"internal/runtimepatch/pace.go":   "nanosleep(2) made raw, so that the measurement holds the processor as running code would, takes the timespec's address",
	"shm/segment.go":                  "counters in a mapping shared with other processes are atomic words only through a pointer conversion",
	"plugins/limitcount/windows.go":   "limit-count's windows are atomic words of a shared mapping",
	"shm/health.go":                   "node health is atomic words of a shared mapping",
	"shm/keyed.go":                    "a keyed table's slots are atomic words of a shared mapping",
	"plugins/prometheus/table.go":     "series counters are atomic words of a shared mapping, and the entry layout is checked against unsafe.Sizeof",
	"master/reaper.go":                "prctl(PR_GET_CHILD_SUBREAPER) writes into an int whose address is its argument, and x/sys/unix has no wrapper for it",
	"benchmark/upstream/main.go":      "epoll_pwait(2) made raw, which x/sys/unix only offers through the runtime's bookkeeping, takes the events' address",
}

// Every file that imports unsafe is listed above with its reason, and every listed file
// still does: a new use is a decision to write down, and a stale entry a reason gone.
func TestUnsafeUsesAreListed(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "bin" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "unsafe" {
				rel, _ := filepath.Rel(root, path)
				found = append(found, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if strings.HasSuffix(f, "_test.go") {
			continue // tests may look at memory to check a view
		}
		if _, ok := unsafeUsers[f]; !ok {
			t.Errorf("%s imports unsafe: view strings and bytes with internal/bytesconv, or list the file in unsafe_test.go with the reason it must", f)
		}
	}
	for f := range unsafeUsers {
		if !slices.Contains(found, f) {
			t.Errorf("%s is listed in unsafe_test.go but no longer imports unsafe: remove it from the list", f)
		}
	}
}

// moduleRoot is the directory of go.mod above the package's own.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}
