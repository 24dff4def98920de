package master

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"gw/conf"
	"gw/internal/errlog"
	"gw/ipc"
)

// The supervisor's tests run it on fake processes inside a synctest bubble: time there is
// fake and moves only when every goroutine waits, so a 15 s readiness timeout or a 1 s
// back-off takes no time, and synctest.Wait says when the goroutines the supervisor
// started have done what they will. The test goroutine plays the master's loop: it takes
// each exit from exits and hands it to handleExit.

// fakeProcess is a worker that exists only in the test.
type fakeProcess struct {
	w    *workerProc
	exit chan int // its exit code, once it ends; the first end wins

	mu         sync.Mutex
	stops      []bool // every stop request: graceful or not
	killed     bool
	exitOnStop bool // it ends with code 0 as soon as it is asked to stop
}

func (p *fakeProcess) wait() (int, error) {
	code := <-p.exit
	if code != 0 {
		return code, fmt.Errorf("exit status %d", code)
	}
	return 0, nil
}

func (p *fakeProcess) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.end(-1)
}

func (p *fakeProcess) stop(graceful bool) {
	p.mu.Lock()
	p.stops = append(p.stops, graceful)
	exit := p.exitOnStop
	p.mu.Unlock()
	if exit {
		p.end(0)
	}
}

// end makes the process exit with code, as a crash (2 is a Go panic), a fatal setup error
// (ipc.FatalExitCode) or a drain that finished (0) would.
func (p *fakeProcess) end(code int) {
	select {
	case p.exit <- code:
	default: // ended already
	}
}

func (p *fakeProcess) becomeReady() { p.w.readyOnce.Do(func() { close(p.w.ready) }) }

func (p *fakeProcess) stopRequests() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bool(nil), p.stops...)
}

func (p *fakeProcess) wasKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// fakeWorkers is the supervisor's spawn: every worker it starts is a fakeProcess that
// reports ready at once unless onSpawn says otherwise.
type fakeWorkers struct {
	mu      sync.Mutex
	spawned []*fakeProcess
	// onSpawn, when set, decides how a new worker behaves instead: it is ready only if
	// onSpawn makes it so. A non-nil error fails the spawn.
	onSpawn func(p *fakeProcess) error
}

func (f *fakeWorkers) spawn(slot int, gen *generation) (*workerProc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &fakeProcess{exit: make(chan int, 1)}
	p.w = newWorkerProc(slot, gen.id, 1000+len(f.spawned), p, nil)
	if f.onSpawn == nil {
		p.becomeReady()
	} else if err := f.onSpawn(p); err != nil {
		return nil, err
	}
	f.spawned = append(f.spawned, p)
	return p.w, nil
}

func (f *fakeWorkers) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.spawned)
}

// last is the newest worker spawned for slot.
func (f *fakeWorkers) last(slot int) *fakeProcess {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.spawned) - 1; i >= 0; i-- {
		if f.spawned[i].w.slot == slot {
			return f.spawned[i]
		}
	}
	return nil
}

func (f *fakeWorkers) endAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.spawned {
		p.end(-1)
	}
}

func (f *fakeWorkers) setOnSpawn(onSpawn func(p *fakeProcess) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onSpawn = onSpawn
}

// lockedBuffer collects the supervisor's log; goroutines write it while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testGeneration(id uint64, workers int) *generation {
	return &generation{id: id, workers: workers, cfg: &conf.Config{WorkerShutdownTimeout: 30 * time.Second}}
}

// runningSupervisor is a supervisor whose first generation of n workers serves.
func runningSupervisor(t *testing.T, n int) (*supervisor, *fakeWorkers, *lockedBuffer) {
	t.Helper()
	fake := &fakeWorkers{}
	log := &lockedBuffer{}
	s := newSupervisor(fake.spawn, errlog.New(log, "master"))
	s.begin(testGeneration(1, n))
	if err := s.fill(); err != nil {
		t.Fatalf("fill: %v", err)
	}
	// A bubble ends only once every goroutine in it has: each watch waits for its
	// process, and a back-off's respawn must find the supervisor stopped.
	t.Cleanup(func() {
		s.halt()
		fake.endAll()
	})
	return s, fake, log
}

// crash ends the worker in slot with code and runs the master's loop on its exit.
func crash(t *testing.T, s *supervisor, slot, code int) {
	t.Helper()
	handleExits(s)
	s.view().slots[slot].proc.(*fakeProcess).end(code)
	s.handleExit(<-s.exits)
	synctest.Wait() // a respawn's readiness wait, or a back-off, has run as far as it can
}

// handleExits runs the master's loop on every exit that has happened.
func handleExits(s *supervisor) {
	synctest.Wait()
	for len(s.exits) > 0 {
		s.handleExit(<-s.exits)
	}
}

func TestSupervisorRespawnsACrashedWorkerIntoItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, _ := runningSupervisor(t, 2)
		crashed := fake.last(1)
		crash(t, s, 1, 2) // a worker that panics exits 2, and is no special case
		if fake.count() != 3 {
			t.Fatalf("%d workers spawned, want 3: the crashed one respawned", fake.count())
		}
		v := s.view()
		respawned := v.slots[1]
		if respawned == crashed.w || respawned.proc != fake.last(1) || respawned.slot != 1 || respawned.generation != 1 {
			t.Fatalf("slot 1 holds %+v, want a new worker of generation 1 in slot 1", respawned)
		}
		if v.slots[0] != fake.spawned[0].w {
			t.Errorf("slot 0 changed: the other slot's worker must be left alone")
		}
		if v.restarts != 1 {
			t.Errorf("restarts = %d, want 1", v.restarts)
		}
	})
}

func TestSupervisorBacksOffASlotThatCrashLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, log := runningSupervisor(t, 1)
		// crashLimit crashes a second apart, all within crashWindow: each respawns at once.
		for i := 1; i <= crashLimit; i++ {
			crash(t, s, 0, 2)
			if got := fake.count(); got != i+1 {
				t.Fatalf("after crash %d: %d spawns, want %d (a respawn at once)", i, got, i+1)
			}
			time.Sleep(time.Second)
		}
		crash(t, s, 0, 2) // one more within the window
		if got := fake.count(); got != crashLimit+1 {
			t.Fatalf("crash %d within %v respawned at once, want a %v back-off", crashLimit+1, crashWindow, crashBackOff)
		}
		if !strings.Contains(log.String(), "crashed more than 3 times within 10s: respawning in 1s") {
			t.Errorf("the back-off is not logged:\n%s", log)
		}
		time.Sleep(crashBackOff - time.Millisecond)
		synctest.Wait()
		if got := fake.count(); got != crashLimit+1 {
			t.Fatalf("respawned %v early", time.Millisecond)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := fake.count(); got != crashLimit+2 {
			t.Fatalf("%d spawns after the back-off, want %d", got, crashLimit+2)
		}
		if s.view().slots[0] != fake.last(0).w {
			t.Fatal("the worker respawned after the back-off is not in slot 0")
		}
		// Once the crashes have left the window, a crash respawns at once again.
		time.Sleep(crashWindow)
		crash(t, s, 0, 2)
		if got := fake.count(); got != crashLimit+3 {
			t.Fatalf("a crash after %v of calm was backed off: %d spawns, want %d", crashWindow, got, crashLimit+3)
		}
		if r := s.view().restarts; r != crashLimit+2 {
			t.Errorf("restarts = %d, want %d", r, crashLimit+2)
		}
	})
}

func TestSupervisorDoesNotRespawnAFatalExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, log := runningSupervisor(t, 1)
		crash(t, s, 0, ipc.FatalExitCode)
		if got := fake.count(); got != 1 {
			t.Fatalf("%d spawns: a worker that exited with the fatal code was respawned", got)
		}
		if v := s.view(); len(v.workers) != 0 || v.restarts != 0 {
			t.Errorf("live workers %d, restarts %d: want none of either", len(v.workers), v.restarts)
		}
		if !strings.Contains(log.String(), "cannot be respawned") {
			t.Errorf("the fatal exit is not logged:\n%s", log)
		}
	})
}

func TestSupervisorDoesNotRespawnWhileStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, _ := runningSupervisor(t, 1)
		s.halt()
		crash(t, s, 0, 2)
		if got := fake.count(); got != 1 {
			t.Fatalf("%d spawns: a worker was respawned after halt", got)
		}
	})
}

func TestSupervisorDoesNotRespawnAWorkerToldToDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, _ := runningSupervisor(t, 1)
		s.view().slots[0].shutdown(true) // still the current worker, but draining
		crash(t, s, 0, 0)
		if got := fake.count(); got != 1 {
			t.Fatalf("%d spawns: a draining worker was respawned", got)
		}
	})
}

func TestSupervisorReplaceDrainsTheOldGenerationOnceTheNewIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, _ := runningSupervisor(t, 2)
		old := []*fakeProcess{fake.spawned[0], fake.spawned[1]}
		// The new workers report ready only after a while: until then nothing changes.
		fake.setOnSpawn(func(p *fakeProcess) error {
			go func() {
				time.Sleep(time.Second)
				p.becomeReady()
			}()
			return nil
		})
		gen2 := testGeneration(2, 3)
		done := make(chan error)
		go func() {
			_, err := s.replace(gen2)
			done <- err
		}()
		synctest.Wait()
		if s.current().id != 1 || len(s.serving()) != 5 {
			t.Fatalf("while the new generation starts: generation %d, %d workers receiving snapshots; want 1 and all 5",
				s.current().id, len(s.serving()))
		}
		for _, p := range old {
			if len(p.stopRequests()) != 0 {
				t.Fatalf("an old worker was told to stop before the new generation was ready")
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("replace: %v", err)
		}
		v := s.view()
		if v.gen != gen2 || len(v.slots) != 3 {
			t.Fatalf("generation %d with %d slots, want 2 with 3", v.gen.id, len(v.slots))
		}
		for slot, w := range v.slots {
			if w.generation != 2 || w.slot != slot {
				t.Errorf("slot %d holds generation %d slot %d", slot, w.generation, w.slot)
			}
		}
		for _, p := range old {
			if stops := p.stopRequests(); len(stops) != 1 || !stops[0] || p.w.state() != "draining" {
				t.Errorf("old worker slot %d: stop requests %v, state %s; want one graceful stop, draining", p.w.slot, stops, p.w.state())
			}
		}
		if len(v.workers) != 5 {
			t.Errorf("%d live workers, want 3 new and 2 draining", len(v.workers))
		}
		// A draining worker's end is never respawned, whether it finished or crashed.
		old[0].end(0)
		s.handleExit(<-s.exits)
		old[1].end(2)
		s.handleExit(<-s.exits)
		synctest.Wait()
		if got := fake.count(); got != 5 {
			t.Fatalf("%d spawns, want 5: a draining worker was respawned", got)
		}
		if v := s.view(); len(v.workers) != 3 || v.restarts != 0 {
			t.Errorf("after the drain: %d live workers and %d restarts, want 3 and 0", len(v.workers), v.restarts)
		}
		if len(s.draining) != 0 {
			t.Errorf("%d drained workers still tracked", len(s.draining))
		}
	})
}

func TestSupervisorReplaceThatFailsKeepsTheOldGenerationServing(t *testing.T) {
	tests := []struct {
		name string
		// slot1 is how the new generation's slot 1 behaves; slot 0 becomes ready.
		slot1 func(p *fakeProcess) error
		want  string
		// took is how long replace takes to give up.
		took time.Duration
	}{
		{"exits before it is ready", func(p *fakeProcess) error { p.end(ipc.FatalExitCode); return nil },
			"worker slot 1 (pid 1003) exited before it was ready: exit status 78", 0},
		{"not ready in time", func(p *fakeProcess) error { return nil },
			"worker slot 1 (pid 1003) not ready within 15s", readyTimeout},
		{"cannot be spawned", func(p *fakeProcess) error {
			return errors.New("starting worker slot 1: fork/exec: resource temporarily unavailable")
		},
			"starting worker slot 1: fork/exec", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, fake, _ := runningSupervisor(t, 2)
				before := s.view()
				var newSlot0 *fakeProcess
				fake.setOnSpawn(func(p *fakeProcess) error {
					if p.w.slot == 0 {
						newSlot0 = p
						p.becomeReady()
						return nil
					}
					return tt.slot1(p)
				})
				start := time.Now()
				_, err := s.replace(testGeneration(2, 2))
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("replace: %v, want an error containing %q", err, tt.want)
				}
				if took := time.Since(start); took != tt.took {
					t.Errorf("replace gave up after %v, want %v", took, tt.took)
				}
				if !newSlot0.wasKilled() || !newSlot0.w.hasExited() {
					t.Errorf("the new generation's ready worker was left running")
				}
				after := s.view()
				if after.gen.id != 1 || after.slots[0] != before.slots[0] || after.slots[1] != before.slots[1] || len(after.workers) != 2 {
					t.Fatalf("generation %d, slots %v: want generation 1 on its old workers", after.gen.id, after.slots)
				}
				for _, p := range fake.spawned[:2] {
					if len(p.stopRequests()) != 0 || p.w.draining.Load() {
						t.Errorf("old worker slot %d was told to stop", p.w.slot)
					}
				}
				if len(s.serving()) != 2 {
					t.Errorf("%d workers receive snapshots, want the 2 old ones: the failed ones are forgotten", len(s.serving()))
				}
				// The old generation is still supervised as the current one.
				fake.setOnSpawn(nil)
				crash(t, s, 0, 2)
				if w := s.view().slots[0]; w.generation != 1 || w == before.slots[0] {
					t.Errorf("slot 0 after a crash holds generation %d, want a respawned worker of generation 1", w.generation)
				}
			})
		})
	}
}

func TestSupervisorDropsABackedOffRespawnOnceReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, fake, _ := runningSupervisor(t, 1)
		for range crashLimit + 1 {
			crash(t, s, 0, 2)
		}
		spawned := fake.count() // the last crash's respawn waits out the back-off
		if _, err := s.replace(testGeneration(2, 1)); err != nil {
			t.Fatalf("replace: %v", err)
		}
		time.Sleep(crashBackOff)
		synctest.Wait()
		if got := fake.count(); got != spawned+1 {
			t.Fatalf("%d spawns, want %d: the old generation's respawn was not dropped", got, spawned+1)
		}
		if w := s.view().slots[0]; w.generation != 2 {
			t.Fatalf("slot 0 holds generation %d, want 2", w.generation)
		}
	})
}

func TestSupervisorStopKillsWorkersThatOutliveTheDeadline(t *testing.T) {
	tests := []struct {
		name     string
		graceful bool
		deadline time.Duration
	}{
		{"graceful", true, 30*time.Second + time.Second}, // worker_shutdown_timeout and a second
		{"fast", false, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, fake, _ := runningSupervisor(t, 2)
				obedient, stubborn := fake.spawned[0], fake.spawned[1]
				obedient.mu.Lock()
				obedient.exitOnStop = true
				obedient.mu.Unlock()
				start := time.Now()
				s.stop(s.halt(), tt.graceful)
				if took := time.Since(start); took != tt.deadline {
					t.Errorf("stop returned after %v, want %v", took, tt.deadline)
				}
				if obedient.wasKilled() || !stubborn.wasKilled() {
					t.Errorf("killed: the one that stopped %t, the one that did not %t; want false, true", obedient.wasKilled(), stubborn.wasKilled())
				}
				for _, p := range fake.spawned {
					if stops := p.stopRequests(); len(stops) != 1 || stops[0] != tt.graceful {
						t.Errorf("worker slot %d was asked %v, want one stop with graceful %t", p.w.slot, stops, tt.graceful)
					}
				}
			})
		})
	}
}
