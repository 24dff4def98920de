package batch

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gw/internal/race"
	"gw/plugins/pluginconf"
)

// collector records the batches a processor sends, and when.
type collector struct {
	mu      sync.Mutex
	batches [][]string
	at      []time.Time
	fail    int // the next sends that fail
	block   chan struct{}
}

func (c *collector) send(entries [][]byte) error {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("collector down")
	}
	batch := make([]string, len(entries))
	for i, e := range entries {
		batch[i] = string(e)
	}
	c.batches = append(c.batches, batch)
	c.at = append(c.at, time.Now())
	return nil
}

func (c *collector) wait(t *testing.T, n int, within time.Duration) ([][]string, []time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		if len(c.batches) >= n {
			b, at := append([][]string(nil), c.batches...), append([]time.Time(nil), c.at...)
			c.mu.Unlock()
			return b, at
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Fatalf("%d batches within %v, want %d: %v", len(c.batches), within, n, c.batches)
	return nil, nil
}

func config(batchMax, inactive, buffer int) Config {
	c := Defaults()
	c.BatchMaxSize = batchMax
	c.InactiveTimeout = time.Duration(inactive) * time.Second
	c.BufferDuration = time.Duration(buffer) * time.Second
	c.RetryDelay = 0
	return c
}

func counters() Counters {
	return Counters{BufferFull: new(atomic.Uint64), SendFailed: new(atomic.Uint64)}
}

// A full batch leaves at once, in the order added; the rest after inactive_timeout.
func TestBatchMaxSizeThenInactiveTimeout(t *testing.T) {
	c := &collector{}
	p := New(config(3, 1, 60), c.send, counters(), nil)
	start := time.Now()
	for i := range 7 {
		p.Add(fmt.Appendf(nil, "e%d", i))
	}
	batches, at := c.wait(t, 3, 10*time.Second)
	want := "[[e0 e1 e2] [e3 e4 e5] [e6]]"
	if got := fmt.Sprint(batches); got != want {
		t.Fatalf("batches = %s, want %s", got, want)
	}
	if d := at[1].Sub(start); d > 900*time.Millisecond {
		t.Errorf("the full batches left after %v, want at once", d)
	}
	if d := at[2].Sub(start); d < time.Second {
		t.Errorf("the last entry left after %v, before inactive_timeout (1s)", d)
	}
}

// Entries that keep coming leave once the oldest has waited buffer_duration, though the
// processor is never inactive for inactive_timeout.
func TestBufferDuration(t *testing.T) {
	c := &collector{}
	p := New(config(1000, 30, 1), c.send, counters(), nil)
	start := time.Now()
	stop := time.After(4 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				p.Add([]byte("x"))
			}
		}
	}()
	_, at := c.wait(t, 1, 10*time.Second)
	<-done
	if d := at[0].Sub(start); d < time.Second || d > 3500*time.Millisecond {
		t.Errorf("the first batch left after %v, want buffer_duration (1s) and well before inactive_timeout (30s)", d)
	}
}

// A failed batch is retried max_retry_count times, then dropped and counted.
func TestRetryThenDrop(t *testing.T) {
	c := &collector{fail: 2}
	cfg := config(1, 1, 60)
	cfg.MaxRetryCount = 2
	p := New(cfg, c.send, counters(), nil)
	p.Add([]byte("kept"))
	if batches, _ := c.wait(t, 1, 10*time.Second); batches[0][0] != "kept" {
		t.Fatalf("batches = %v", batches)
	}

	c = &collector{fail: 2}
	cfg.MaxRetryCount = 1
	count := counters()
	var logged []string
	var mu sync.Mutex
	p = New(cfg, c.send, count, func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() })
	p.Add([]byte("lost"))
	deadline := time.Now().Add(10 * time.Second)
	for count.SendFailed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := count.SendFailed.Load(); got != 1 {
		t.Fatalf("SendFailed = %d, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "dropped 1 entries: sending failed 2 times: collector down") {
		t.Errorf("logged %q", logged)
	}
}

// A collector that never answers costs the worker MaxPending at most: Add never waits,
// and what does not fit is dropped and counted, and logged once a second at most.
func TestStuckCollectorBlocksNothing(t *testing.T) {
	c := &collector{block: make(chan struct{})}
	defer close(c.block)
	count := counters()
	var lines atomic.Int32
	p := New(config(10, 1, 60), c.send, count, func(string, ...any) { lines.Add(1) })
	entry := make([]byte, 64<<10)
	n := 2 * MaxPending / len(entry)
	// An Add that waited on the collector would never return: the collector never
	// answers. The bound is for the test, not a timing goal (growing the buffer copies
	// it, slow under -race with both CPUs busy).
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			p.Add(entry)
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Add blocked with the collector stuck")
	}
	dropped := count.BufferFull.Load()
	if dropped < uint64(n/2-1) || dropped > uint64(n/2+1) {
		t.Errorf("BufferFull = %d of %d entries of 64 KiB, want about %d (MaxPending %d)", dropped, n, n/2, MaxPending)
	}
	if got := lines.Load(); got != 1 {
		t.Errorf("%d log lines for the drops of one second, want 1", got)
	}
}

// waitForRoom waits until the entries other tests left pending (TestStuckCollector-
// BlocksNothing's 32 MiB, slow to drain under -race) take at most half of MaxPending:
// past it the worker's bound would drop a test's entries.
func waitForRoom(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for pendingBytes.Load() > MaxPending/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of other tests' entries still pending after 60s", pendingBytes.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// Add allocates nothing once the processor's buffers have held a batch.
func TestAddAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	waitForRoom(t)
	deadline := time.Now().Add(10 * time.Second)
	var sent atomic.Int64
	p := New(config(500, 3600, 3600), func(e [][]byte) error { sent.Add(int64(len(e))); return nil }, counters(), nil)
	entry := []byte(`{"request":{"uri":"/hello"}}`)
	for range 500 {
		p.Add(entry)
	}
	for sent.Load() < 500 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	allocs := testing.AllocsPerRun(400, func() { p.Add(entry) })
	if allocs != 0 {
		t.Errorf("Add: %.1f allocations", allocs)
	}
	allocs = testing.AllocsPerRun(400, func() { p.AddWith(func(dst []byte) []byte { return append(dst, entry...) }) })
	if allocs != 0 {
		t.Errorf("AddWith: %.1f allocations", allocs)
	}
}

// An entry AddWith wrote that does not fit the worker's bound is taken back out of the
// buffer whole, and counted; the entries around it go as written.
func TestAddWithDropsWhatDoesNotFit(t *testing.T) {
	waitForRoom(t)
	c := &collector{}
	count := counters()
	p := New(config(2, 3600, 3600), c.send, count, nil)
	write := func(s string) func([]byte) []byte {
		return func(dst []byte) []byte { return append(dst, s...) }
	}
	p.AddWith(write("first"))
	pendingBytes.Add(MaxPending) // the worker's other processors hold all they may
	p.AddWith(write("dropped"))
	pendingBytes.Add(-MaxPending)
	p.AddWith(write("second"))
	batches, _ := c.wait(t, 1, 10*time.Second)
	if got := fmt.Sprint(batches[0]); got != "[first second]" || count.BufferFull.Load() != 1 {
		t.Errorf("batch %s, %d dropped; want [first second], 1 dropped", got, count.BufferFull.Load())
	}
}

func BenchmarkAdd(b *testing.B) {
	p := New(config(1000, 1, 60), func([][]byte) error { return nil }, counters(), nil)
	entry := []byte(strings.Repeat("x", 600))
	b.ReportAllocs()
	for b.Loop() {
		p.Add(entry)
	}
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		member, value string
		want          string // "" accepted
	}{
		{"batch_max_size", "1", ""},
		{"batch_max_size", "0", "batch_max_size: must be an integer from 1 to 1000000, got 0"},
		{"inactive_timeout", "0", "inactive_timeout: must be an integer from 1 to 86400, got 0"},
		{"buffer_duration", "1.5", "buffer_duration: must be an integer from 1 to 86400, got 1.5"},
		{"max_retry_count", "0", ""},
		{"max_retry_count", "-1", "max_retry_count: must be an integer from 0 to 1000, got -1"},
		{"retry_delay", "0", ""},
		{"name", `""`, "name: must not be empty"},
		{"name", `"buf"`, ""},
	} {
		var c Config
		var taken bool
		err := pluginconf.Compact.Each([]byte(`{"`+tc.member+`":`+tc.value+`}`), func(m pluginconf.Member) (err error) {
			taken, err = c.Take(m)
			return err
		})
		if !taken {
			t.Errorf("%s not taken", tc.member)
		}
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.member, tc.value, err, tc.want)
		}
	}
	var c Config
	if taken, _ := c.Take(pluginconf.Member{Name: "uri"}); taken {
		t.Error("uri taken")
	}
}

// A slow collector lets entries pile up behind the batch being sent: the full batches
// among them go in one hand-over, each entry in the order added, none copied twice over.
func TestBacklogLeavesInFullBatches(t *testing.T) {
	waitForRoom(t)
	c := &collector{block: make(chan struct{})}
	p := New(config(2, 3600, 3600), c.send, counters(), nil)
	p.Add([]byte("e0"))
	p.Add([]byte("e1")) // a full batch: the goroutine takes it and blocks in send
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		taken := len(p.ends) == 0
		p.mu.Unlock()
		if taken || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := 2; i < 9; i++ {
		p.Add(fmt.Appendf(nil, "e%d", i))
	}
	close(c.block)
	batches, _ := c.wait(t, 4, 10*time.Second)
	if got, want := fmt.Sprint(batches), "[[e0 e1] [e2 e3] [e4 e5] [e6 e7]]"; got != want {
		t.Fatalf("batches = %s, want %s", got, want)
	}
	time.Sleep(50 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ends) != 1 || string(p.buf) != "e8" {
		t.Errorf("waiting after the full batches: %d entries %q, want e8 alone", len(p.ends), p.buf)
	}
}

// BenchmarkAddBacklog is Add while the collector falls behind: the entries pile up
// behind the batch being sent.
func BenchmarkAddBacklog(b *testing.B) {
	p := New(config(1000, 1, 60), func([][]byte) error { time.Sleep(time.Millisecond); return nil }, counters(), nil)
	entry := []byte(strings.Repeat("x", 600))
	b.ReportAllocs()
	for b.Loop() {
		p.Add(entry)
	}
}

// joinedCollector records the bodies a NewJoined processor sends.
type joinedCollector struct {
	collector
	bodies []string
}

func (c *joinedCollector) send(body []byte) error {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("collector down")
	}
	c.bodies = append(c.bodies, string(body))
	c.batches = append(c.batches, nil) // for wait
	return nil
}

// A joined processor sends each batch as one body, joined where its entries lie: the
// full batches of a backlog one after the other (each one's Close written over the next
// one's first gap), the last with a Close appended, a failed one again as it was, and
// what waits behind them keeps its gap.
func TestJoinedBacklogAndRetry(t *testing.T) {
	waitForRoom(t)
	c := &joinedCollector{collector: collector{block: make(chan struct{}), fail: 1}}
	cfg := config(2, 3600, 3600)
	cfg.MaxRetryCount = 1
	p := NewJoined(cfg, Joined{Open: '[', Sep: ',', Close: ']'}, c.send, counters(), nil)
	p.Add([]byte("e0"))
	p.AddWith(func(dst []byte) []byte { return append(dst, "e1"...) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		taken := len(p.ends) == 0
		p.mu.Unlock()
		if taken || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := 2; i < 9; i++ {
		p.Add(fmt.Appendf(nil, "e%d", i))
	}
	close(c.block)
	c.wait(t, 4, 10*time.Second)
	c.mu.Lock()
	got := fmt.Sprint(c.bodies)
	c.mu.Unlock()
	if want := "[[e0,e1] [e2,e3] [e4,e5] [e6,e7]]"; got != want {
		t.Fatalf("bodies = %s, want %s", got, want)
	}
	time.Sleep(50 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ends) != 1 || string(p.buf) != ",e8" {
		t.Errorf("waiting after the full batches: %d entries %q, want e8 alone after its gap", len(p.ends), p.buf)
	}
}

// Without Open, a batch is its entries with Sep between them and nothing around them
// (http-logger's new_line, or an entry alone with batch_max_size 1).
func TestJoinedWithoutOpen(t *testing.T) {
	c := &joinedCollector{}
	p := NewJoined(config(3, 1, 60), Joined{Sep: '\n'}, c.send, counters(), nil)
	for i := range 3 {
		p.Add(fmt.Appendf(nil, "e%d", i))
	}
	c.wait(t, 1, 10*time.Second)
	one := &joinedCollector{}
	p = NewJoined(config(1, 1, 60), Joined{}, one.send, counters(), nil)
	p.Add([]byte("alone"))
	one.wait(t, 1, 10*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	one.mu.Lock()
	defer one.mu.Unlock()
	if c.bodies[0] != "e0\ne1\ne2" || one.bodies[0] != "alone" {
		t.Errorf("new_line %q, batch_max_size 1 %q", c.bodies[0], one.bodies[0])
	}
}
