package limitcount

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/internal/race"
)

// fakeRedis counts as the script does, in memory: each call adds its cost (ARGV[3]) to
// the key's count.
type fakeRedis struct {
	mu     sync.Mutex
	counts map[string]int64
	costs  []int64 // of every call, in order
	// hold, when set, is called outside the lock before each call is counted.
	hold func(ctx context.Context, call int) error
}

func (f *fakeRedis) send(ctx context.Context, key string, args []string) (int64, time.Duration, error) {
	cost, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	f.mu.Lock()
	call := len(f.costs)
	f.costs = append(f.costs, cost)
	f.mu.Unlock()
	if f.hold != nil {
		if err := f.hold(ctx, call); err != nil {
			return 0, 0, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// key is a view of the coalescer's buffer, reused once the call returns: keep a copy,
	// as Redis does (an assignment stores its key even when the map has it).
	key = strings.Clone(key)
	f.counts[key] += cost
	return f.counts[key], 42 * time.Second, nil
}

func newFakeCoalescer(f *fakeRedis, timeout time.Duration) *coalescer {
	f.counts = map[string]int64{}
	return newCoalescer(100, 60, f.send, func(now int64) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, now).Add(timeout))
		_ = cancel // left to expire, as redispolicy.Client.Deadline's are
		return ctx
	})
}

// Requests that arrive while a key's call is in flight are counted by one call of their
// total cost once it returns, and each takes its own count: the ten requests see 1 to 10
// each once, as ten calls in a row would.
func TestCoalescerJoinsConcurrentRequests(t *testing.T) {
	sent := make(chan int, 16)
	release := make(chan struct{})
	f := &fakeRedis{hold: func(_ context.Context, call int) error {
		sent <- call
		if call == 0 {
			<-release
		}
		return nil
	}}
	co := newFakeCoalescer(f, time.Minute)
	used := make(chan int64, 10)
	count := func() {
		u, left, err := co.count([]byte("k"))
		if err != nil || left != 42*time.Second {
			t.Errorf("count = %d, %v, %v", u, left, err)
		}
		used <- u
	}
	go count()
	<-sent // the first call is in flight
	for range 9 {
		go count()
	}
	// Wait until all nine have joined the batch that follows it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		co.mu.Lock()
		joined := int64(0)
		if kc := co.calls["k"]; kc != nil && kc.waiting != nil {
			joined = kc.waiting.cost
		}
		co.mu.Unlock()
		if joined == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests joined the waiting batch, want 9", joined)
		}
	}
	close(release)
	var got []int64
	for range 10 {
		got = append(got, <-used)
	}
	slices.Sort(got)
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("counts seen %v, want %v", got, want)
	}
	if want := []int64{1, 9}; !slices.Equal(f.costs, want) {
		t.Errorf("calls' costs %v, want %v", f.costs, want)
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(co.calls) != 0 {
		t.Errorf("%d keys still recorded after every call returned", len(co.calls))
	}
}

// Many goroutines on a few keys: every key's counts are handed out once each, and the
// calls' costs add up to the requests.
func TestCoalescerExactUnderLoad(t *testing.T) {
	f := &fakeRedis{hold: func(context.Context, int) error { time.Sleep(50 * time.Microsecond); return nil }}
	co := newFakeCoalescer(f, time.Minute)
	const goroutines, each = 40, 50
	var mu sync.Mutex
	seen := map[string][]int64{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			key := []byte("key-" + strconv.Itoa(g%3))
			for range each {
				u, _, err := co.count(key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[string(key)] = append(seen[string(key)], u)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for key, counts := range seen {
		slices.Sort(counts)
		for i, u := range counts {
			if u != int64(i+1) {
				t.Fatalf("%s: counts seen %v, want 1 to %d once each", key, counts, len(counts))
			}
		}
		total += len(counts)
	}
	var cost int64
	for _, c := range f.costs {
		cost += c
	}
	if total != goroutines*each || cost != goroutines*each {
		t.Errorf("%d requests, calls' costs add up to %d; want %d", total, cost, goroutines*each)
	}
	t.Logf("%d requests in %d calls", total, len(f.costs))
}

// No request waits past its own deadline, though it may first wait for a call sent
// before it: with Redis answering nothing, a request sent at once, a batch's leader and
// the batch's others all fail with the deadline of their own arrival. Each call's
// deadline is checked against the arrivals, not the clock after the call: a leader
// bounded from when it sends would have one about a timeout later than its arrival's
// (half a timeout is left for a preemption between an arrival's reading and count's).
func TestCoalescerNeverWaitsPastTheTimeout(t *testing.T) {
	const timeout = time.Second
	var (
		mu        sync.Mutex
		deadlines []time.Time
	)
	f := &fakeRedis{hold: func(ctx context.Context, _ int) error {
		d, _ := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, d)
		mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}}
	co := newFakeCoalescer(f, timeout)
	var wg sync.WaitGroup
	var lastArrival time.Time
	for i := range 6 {
		wg.Go(func() {
			mu.Lock()
			lastArrival = time.Now()
			mu.Unlock()
			if _, _, err := co.count([]byte("k")); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("request %d: %v, want a deadline error", i, err)
			}
		})
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if len(deadlines) < 2 {
		t.Fatalf("%d calls, want at least two (one in flight, then the batch behind it)", len(deadlines))
	}
	for i, d := range deadlines {
		if latest := lastArrival.Add(timeout + timeout/2); d.After(latest) {
			t.Errorf("call %d's deadline is %v past the last request's arrival plus 1.5 timeouts", i, d.Sub(latest))
		}
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(co.calls) != 0 || len(co.freeCalls) != 0 {
		t.Errorf("after failures: %d keys recorded, %d kept for reuse; want none (a failed call may still read its key)",
			len(co.calls), len(co.freeCalls))
	}
}

// The coalescer's bookkeeping allocates nothing once warm: the key is a view of a reused
// buffer, the batch and the ARGV are reused.
func TestCoalescerAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector adds allocations")
	}
	f := &fakeRedis{}
	co := newFakeCoalescer(f, time.Minute)
	ctx := context.Background()
	co.send = func(context.Context, string, []string) (int64, time.Duration, error) { return 1, time.Second, nil }
	co.deadline = func(int64) context.Context { return ctx }
	key := []byte("plugin-limit-count:v1:/apisix/routes/1:123456:10.0.0.1")
	if allocs := testing.AllocsPerRun(1000, func() { co.count(key) }); allocs != 0 {
		t.Errorf("%v allocations per count, want 0", allocs)
	}
}

// BenchmarkCoalescer is the coalescer's own cost per request, Redis answering at once
// and 64 goroutines per processor on one key.
func BenchmarkCoalescer(b *testing.B) {
	f := &fakeRedis{}
	co := newFakeCoalescer(f, time.Minute)
	co.send = func(context.Context, string, []string) (int64, time.Duration, error) {
		return 1 << 40, time.Second, nil
	}
	ctx := context.Background()
	co.deadline = func(int64) context.Context { return ctx }
	key := []byte("plugin-limit-count:v1:/apisix/routes/1:123456:10.0.0.1")
	b.SetParallelism(64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			co.count(key)
		}
	})
}

// A call whose sending panics does not wedge its key: the panic goes on up, the requests
// that joined its batch get an error, and the key's next request counts.
func TestCoalescerSurvivesAPanickingSend(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	f := &fakeRedis{hold: func(_ context.Context, call int) error {
		if call == 0 {
			close(entered)
			<-release
			panic("boom")
		}
		return nil
	}}
	co := newFakeCoalescer(f, time.Minute)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		co.count([]byte("k"))
	}()
	<-entered
	// A request that arrives meanwhile leads the next batch and counts.
	next := make(chan error, 1)
	go func() {
		_, _, err := co.count([]byte("k"))
		next <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		co.mu.Lock()
		waiting := co.calls["k"] != nil && co.calls["k"].waiting != nil
		co.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request never joined")
		}
	}
	close(release)
	if p := <-panicked; p != "boom" {
		t.Errorf("the panic seen by its request: %v, want boom", p)
	}
	if err := <-next; err != nil {
		t.Errorf("the next batch: %v, want a count", err)
	}
	if u, _, err := co.count([]byte("k")); err != nil || u != 2 {
		t.Errorf("a later request: %d, %v; want 2", u, err)
	}
}
