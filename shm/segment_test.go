package shm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
)

var testLayout = Layout{Name: "test", Version: 3}

func TestCreateOpenShareTheSameMemory(t *testing.T) {
	s, err := Create(testLayout, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Word(8).Store(41)
	o, err := Open(s.File(), testLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Word(8).Add(1)
	if got := s.Word(8).Load(); got != 42 {
		t.Fatalf("shared word = %d, want 42", got)
	}
	if o.Size() != 4096 {
		t.Fatalf("size %d", o.Size())
	}
}

func TestOpenRefusesAnotherLayout(t *testing.T) {
	s, err := Create(testLayout, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, other := range []Layout{{Name: "test", Version: 4}, {Name: "metrics", Version: 3}} {
		_, err := Open(s.File(), other)
		if !errors.Is(err, ErrLayout) {
			t.Errorf("Open as %v: %v, want ErrLayout", other, err)
		}
	}
	plain, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	plain.Write(make([]byte, 128))
	if _, err := Open(plain, testLayout); !errors.Is(err, ErrLayout) {
		t.Errorf("Open of a plain file: %v", err)
	}
}

func TestCreateRejects(t *testing.T) {
	for _, tc := range []struct {
		layout Layout
		size   int
	}{{Layout{Name: ""}, 64}, {Layout{Name: "a-very-long-layout-name"}, 64}, {testLayout, 0}, {testLayout, 12}} {
		if s, err := Create(tc.layout, tc.size); err == nil {
			s.Close()
			t.Errorf("Create(%v, %d) succeeded", tc.layout, tc.size)
		}
	}
}

func TestWordBoundsPanic(t *testing.T) {
	s, err := Create(testLayout, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, off := range []int{-8, 3, 64} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Word(%d) did not panic", off)
				}
			}()
			s.Word(off)
		}()
	}
}

// Processes, not goroutines: children re-executed from this test binary add to one word
// through their own mappings of the inherited memfd.
func TestAtomicAddsAcrossProcesses(t *testing.T) {
	s, err := Create(testLayout, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const children, each = 4, 20000
	var wg sync.WaitGroup
	for i := 0; i < children; i++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildAdder$")
		cmd.Env = append(os.Environ(), "GW_SHM_ADDER=1", "GW_SHM_COUNT="+strconv.Itoa(each))
		cmd.ExtraFiles = []*os.File{s.File()}
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				t.Errorf("child: %v: %s", err, out.String())
			}
		}()
	}
	wg.Wait()
	if got := s.Word(0).Load(); got != children*each {
		t.Fatalf("word = %d, want %d", got, children*each)
	}
}

func TestChildAdder(t *testing.T) {
	if os.Getenv("GW_SHM_ADDER") != "1" {
		t.Skip("helper process for TestAtomicAddsAcrossProcesses")
	}
	s, err := Open(os.NewFile(3, "inherited"), testLayout)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv("GW_SHM_COUNT"))
	for i := 0; i < n; i++ {
		s.Word(0).Add(1)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string { return fmt.Sprint(string(b.b)) }
