package prometheus

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"gw/plugins"
	"gw/shm"
)

// testConn keeps a connection's last state, as the worker does for its observers.
type testConn struct{ state plugins.ConnState }

func (c *testConn) to(ct *ConnTracker, s plugins.ConnState) {
	ct.ConnChanged(c.state, s)
	c.state = s
}

func TestConnTrackerAndRetire(t *testing.T) {
	tab, _ := newTable(t, 10)
	ct, err := NewConnTracker(tab)
	if err != nil {
		t.Fatal(err)
	}
	// Each connection's last state, as the worker keeps it in the connection.
	a, b, c := new(testConn), new(testConn), new(testConn)
	for _, step := range []struct {
		conn  *testConn
		state plugins.ConnState
	}{
		{a, plugins.ConnNew}, {a, plugins.ConnActive}, {a, plugins.ConnIdle}, {a, plugins.ConnActive},
		{b, plugins.ConnNew}, {b, plugins.ConnActive}, {b, plugins.ConnClosed}, // Connection: close
		{c, plugins.ConnNew},
	} {
		step.conn.to(ct, step.state)
	}
	want := ConnStats{Accepted: 3, Handled: 3, Requests: 3, Active: 2, Reading: 1, Writing: 1, Waiting: 0}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("ConnStats = %+v, want %+v", got, want)
	}
	if n := tab.RetireWorkerAreas(func(int) bool { return false }); n != 0 {
		t.Fatalf("retired %d areas of live workers", n)
	}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("a live worker's area was retired: %+v", got)
	}
	// The worker dies: its totals stay, its gauges go, and its area is free again.
	if n := tab.RetireWorkerAreas(func(int) bool { return true }); n != 1 {
		t.Fatalf("retired %d areas, want the dead worker's 1", n)
	}
	want = ConnStats{Accepted: 3, Handled: 3, Requests: 3}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("after retirement ConnStats = %+v, want %+v", got, want)
	}
	ct2, err := NewConnTracker(tab)
	if err != nil {
		t.Fatal(err)
	}
	if ct2.area != ct.area {
		t.Fatalf("the next worker claimed area %d, not the retired %d", ct2.area, ct.area)
	}
	a = new(testConn) // a connection of the new worker
	a.to(ct2, plugins.ConnNew)
	a.to(ct2, plugins.ConnActive)
	want = ConnStats{Accepted: 4, Handled: 4, Requests: 4, Active: 1, Writing: 1}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("after a new worker: %+v, want %+v", got, want)
	}
}

func TestConnTrackerRunsOutOfAreas(t *testing.T) {
	tab, _ := newTable(t, 10)
	for i := 0; i < WorkerAreas; i++ {
		if _, err := NewConnTracker(tab); err != nil {
			t.Fatalf("area %d: %v", i, err)
		}
	}
	if _, err := NewConnTracker(tab); err != ErrNoWorkerArea {
		t.Fatalf("err = %v, want ErrNoWorkerArea", err)
	}
}

// serve counts one connection with n requests on it, then its close.
func serve(ct *ConnTracker, n int) {
	g := new(testConn)
	g.to(ct, plugins.ConnNew)
	for range n {
		g.to(ct, plugins.ConnActive)
		g.to(ct, plugins.ConnIdle)
	}
	g.to(ct, plugins.ConnClosed)
}

// Issue 17: areas retired as their workers die serve any number of worker lifetimes, one
// after another, and every lifetime's requests stay counted.
func TestWorkerAreasOutlastManyWorkerLifetimes(t *testing.T) {
	tab, _ := newTable(t, 10)
	const lifetimes = 3 * WorkerAreas
	for i := range lifetimes {
		pid := 1_000_000 + i
		off, err := tab.claimWorkerArea(pid)
		if err != nil {
			t.Fatalf("worker %d of %d: %v", i+1, lifetimes, err)
		}
		serve(&ConnTracker{t: tab, area: off}, 2)
		open := &ConnTracker{t: tab, area: off}
		new(testConn).to(open, plugins.ConnNew) // still open when the worker dies
		if n := tab.RetireWorkerAreas(func(p int) bool { return p == pid }); n != 1 {
			t.Fatalf("worker %d: retired %d areas, want 1", i+1, n)
		}
	}
	want := ConnStats{Accepted: 2 * lifetimes, Handled: 2 * lifetimes, Requests: 2 * lifetimes}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("after %d lifetimes: %+v, want %+v", lifetimes, got, want)
	}
}

// RetireWorkerAreas leaves a live worker's area and a live master's retirement alone, and
// completes the retirement of a master that died in the middle of one.
func TestRetireLeavesTheLivingAndFinishesForTheDead(t *testing.T) {
	tab, _ := newTable(t, 10)
	const liveWorker, deadWorker, liveMaster, deadMaster = 101, 102, 201, 202
	areas := map[int]int{}
	for _, pid := range []int{liveWorker, deadWorker, liveMaster, deadMaster} {
		off, err := tab.claimWorkerArea(pid)
		if err != nil {
			t.Fatal(err)
		}
		areas[pid] = off
		ct := &ConnTracker{t: tab, area: off}
		serve(ct, 1)
		new(testConn).to(ct, plugins.ConnNew)
	}
	// Two masters, each stopped between its CAS to retiring and its store of retired.
	for _, master := range []int{liveMaster, deadMaster} {
		owner := tab.word(areas[master] + areaOwner)
		owner.Store(ownerRetiring | ownerWord(ownerClaimCount(owner.Load()), master))
	}
	gone := func(pid int) bool { return pid == deadWorker || pid == deadMaster }
	if n := tab.RetireWorkerAreas(gone); n != 2 {
		t.Fatalf("retired %d areas, want the dead worker's and the dead master's 2", n)
	}
	for pid, want := range map[int]struct {
		claimed, claimable bool
		active             uint64
	}{
		liveWorker: {claimed: true, active: 1},
		deadWorker: {claimable: true},
		liveMaster: {active: 1}, // still its to finish
		deadMaster: {claimable: true},
	} {
		w := tab.word(areas[pid] + areaOwner).Load()
		active := tab.word(areas[pid] + areaActive).Load()
		if claimed(w) != want.claimed || claimable(w) != want.claimable || active != want.active {
			t.Errorf("area of %d: owner %#x (claimed %t, claimable %t), active %d; want %+v",
				pid, w, claimed(w), claimable(w), active, want)
		}
	}
	// Every request stays counted; only the live worker's connection is still open.
	want := ConnStats{Accepted: 8, Handled: 8, Requests: 4, Active: 1, Reading: 1}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("ConnStats = %+v, want %+v", got, want)
	}
}

// A master that read a dead worker's owner word cannot retire the area once another
// master has retired it and a new worker that reuses the dead one's pid has claimed it.
func TestRetireDoesNotTakeAnAreaClaimedAgainByAReusedPID(t *testing.T) {
	tab, _ := newTable(t, 10)
	const pid = 4242
	off, err := tab.claimWorkerArea(pid)
	if err != nil {
		t.Fatal(err)
	}
	var successor *ConnTracker
	gone := func(p int) bool {
		if p == pid && successor == nil {
			// Between this master's load and its CAS: another master retires the area
			// and the pid's next process claims it and opens a connection.
			tab.RetireWorkerAreas(func(int) bool { return true })
			again, err := tab.claimWorkerArea(pid)
			if err != nil || again != off {
				t.Fatalf("the successor claimed area %d (%v), want %d", again, err, off)
			}
			successor = &ConnTracker{t: tab, area: again}
			new(testConn).to(successor, plugins.ConnNew)
		}
		return true
	}
	if n := tab.RetireWorkerAreas(gone); n != 0 {
		t.Fatalf("retired %d areas, want none: the only one is the live successor's", n)
	}
	if w := tab.word(off + areaOwner).Load(); !claimed(w) || ownerPID(w) != pid {
		t.Fatalf("owner %#x after the race, want claimed by %d", w, pid)
	}
	if got := tab.ConnStats(); got.Active != 1 || got.Accepted != 1 {
		t.Fatalf("the successor's connection was dropped: %+v", got)
	}
}

// A retired area's owner is a pid no process has, which a binary of before retirement
// takes for a dead worker's.
func TestRetiredPIDIsNobodys(t *testing.T) {
	if err := syscall.Kill(retiredPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(%d, 0) = %v, want ESRCH", retiredPID, err)
	}
}

// Workers live and die on several goroutines while a master retires the dead and scrapes:
// no scrape ever sees a count fall or one that was never made, and the final counts are
// exact, though every area is retired and claimed again several times over.
func TestRetirementUnderConcurrentLifetimesAndScrapes(t *testing.T) {
	tab, _ := newTable(t, 10)
	const (
		workers   = 4
		lifetimes = WorkerAreas // per goroutine: the areas are reused 4 times over
		perLife   = 3           // requests, each on its own connection
	)
	var (
		dead    sync.Map     // pids of finished lifetimes
		started atomic.Int64 // requests whose counting has begun
		failed  atomic.Bool  // stops the workers: the segment must outlive every goroutine
		wg      sync.WaitGroup
	)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < lifetimes && !failed.Load(); i++ {
				pid := 1_000_000 + g*lifetimes + i
				off, err := tab.claimWorkerArea(pid)
				for errors.Is(err, ErrNoWorkerArea) && !failed.Load() { // the master has not caught up
					runtime.Gosched()
					off, err = tab.claimWorkerArea(pid)
				}
				if err != nil {
					return
				}
				ct := &ConnTracker{t: tab, area: off}
				for range perLife {
					started.Add(1)
					serve(ct, 1)
				}
				new(testConn).to(ct, plugins.ConnNew) // dies with it
				dead.Store(pid, true)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	gone := func(pid int) bool { _, ok := dead.Load(pid); return ok }
	retiring := make(chan struct{})
	go func() { // the master's reaps, apart from its scrapes as in gw
		defer close(retiring)
		for {
			select {
			case <-finished:
				return
			default:
				tab.RetireWorkerAreas(gone)
			}
		}
	}()
	var last uint64
	for running := true; running; {
		select {
		case <-retiring:
			running = false
		default:
		}
		got := tab.ConnStats().Requests
		if bound := uint64(started.Load()); got < last || got > bound {
			t.Errorf("requests %d: the previous scrape saw %d, and at most %d were made", got, last, bound)
			failed.Store(true)
			<-retiring
			return
		}
		last = got
	}
	tab.RetireWorkerAreas(gone)
	const total = workers * lifetimes * perLife
	want := ConnStats{Accepted: total + workers*lifetimes, Handled: total + workers*lifetimes, Requests: total}
	if got := tab.ConnStats(); got != want {
		t.Fatalf("after every lifetime: %+v, want %+v", got, want)
	}
}

// A worker without the metrics segment watches nothing; with it, its observer counts into
// an area of its own.
func TestObserveConns(t *testing.T) {
	if o, err := (plugin{}).ObserveConns(&plugins.Shared{}); o != nil || err != nil {
		t.Fatalf("without a segment: %v, %v; want nothing to watch", o, err)
	}
	tab, seg := newTable(t, 10)
	o, err := plugin{}.ObserveConns(&plugins.Shared{Segments: map[string]*shm.Segment{Name: seg}})
	if err != nil {
		t.Fatal(err)
	}
	o.ConnChanged(plugins.ConnUnseen, plugins.ConnNew)
	if got := tab.ConnStats(); got.Accepted != 1 || got.Reading != 1 {
		t.Fatalf("ConnStats = %+v, want the connection counted", got)
	}
}
