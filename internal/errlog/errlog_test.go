package errlog

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLinesCarryLevelPidAndWhoAndRespectTheLevel(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, "worker slot 1")
	l.SetLevel(ParseLevel("warn"))
	l.Infof("dropped %d", 1)
	l.Warnf("kept %s", "a")
	l.Errorf("kept %s", "b")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	line := regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(warn|error)\] \d+#worker slot 1: kept [ab]$`)
	for _, s := range lines {
		if !line.MatchString(s) {
			t.Errorf("line %q", s)
		}
	}
}

func TestReopenFollowsARename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "error.log")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("before\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("still old\n"))
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("after\n"))
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if string(old) != "before\nstill old\n" || string(cur) != "after\n" {
		t.Fatalf("old %q new %q", old, cur)
	}
}
