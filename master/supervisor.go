package master

import (
	"sync"
	"time"

	"gw/conf"
	"gw/internal/errlog"
	"gw/ipc"
)

// readyTimeout bounds how long a new worker may take to report ready.
const readyTimeout = 15 * time.Second

// A slot whose workers die unexpectedly more than crashLimit times within crashWindow is
// respawned only after crashBackOff, so a worker that dies at once does not spin a CPU.
const (
	crashLimit   = 3
	crashWindow  = 10 * time.Second
	crashBackOff = time.Second
)

// generation is one configuration's set of workers. A reload starts a new generation; the
// old one drains.
type generation struct {
	id      uint64
	cfg     *conf.Config
	workers int
	// cfgJSON is cfg as the workers receive it in their setup frame.
	cfgJSON []byte
}

// supervisor keeps a worker in every slot of the current generation. It starts a
// generation and waits until each of its workers is ready, swaps it in for the one it
// replaces, which drains, respawns a current worker that exits unexpectedly, and stops
// them all. It knows workers only through spawn and the process each one runs (execProcess
// in the master), so its tests run without processes.
//
// It owns every list of workers. The master's loop receives each reaped worker from exits
// and hands it to handleExit. Safe for concurrent use; it never calls out while holding
// mu, so a caller may hold its own lock (Master.mu) while calling it.
type supervisor struct {
	// spawn starts a worker process for slot of gen and returns at once (Master.spawn).
	spawn func(slot int, gen *generation) (*workerProc, error)
	log   *errlog.Logger
	// exits carries every worker, once reaped, to the master's loop.
	exits chan *workerProc

	mu       sync.Mutex
	gen      *generation
	slots    []*workerProc       // the current generation, by slot
	starting []*workerProc       // a new generation not yet swapped in
	draining []*workerProc       // older generations still finishing their requests
	stopping bool                // no more respawns: the master stops or has handed over
	crashes  map[int][]time.Time // recent unexpected exits per slot, for back-off
	restarts uint64              // unexpected exits that were respawned
	// http2Abuse is what exited workers last reported of their HTTP/2 abuse counts, so
	// that gw_http2_abuse_total never goes down when a worker leaves.
	http2Abuse map[string]uint64
}

func newSupervisor(spawn func(slot int, gen *generation) (*workerProc, error), log *errlog.Logger) *supervisor {
	return &supervisor{spawn: spawn, log: log, exits: make(chan *workerProc, 256), crashes: map[int][]time.Time{}}
}

// begin makes gen, the master's first generation, current before any of its workers
// runs: the metrics and status servers that start first report on it as not ready yet.
// fill then starts its workers.
func (s *supervisor) begin(gen *generation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen = gen
}

// fill starts a worker in every slot of the current generation and returns once each is
// ready. On failure none is left running.
func (s *supervisor) fill() error {
	slots, err := s.startGeneration(s.current())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.slots = slots
	s.mu.Unlock()
	return nil
}

// replace starts gen and, once every one of its workers is ready, makes it current and
// tells the workers it replaces to drain; it returns those. If any new worker fails to
// become ready, the new ones are killed and the current generation serves on untouched.
func (s *supervisor) replace(gen *generation) (retired []*workerProc, err error) {
	slots, err := s.startGeneration(gen)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	oldSlots := s.slots
	s.gen, s.slots = gen, slots
	for _, w := range oldSlots {
		if w != nil && !w.hasExited() {
			w.draining.Store(true)
			s.draining = append(s.draining, w)
		}
	}
	s.mu.Unlock()
	for _, w := range oldSlots {
		if w != nil {
			w.shutdown(true)
		}
	}
	return oldSlots, nil
}

// startGeneration spawns gen's workers and waits until every one is ready. On failure the
// ones started are killed and the error says which slot failed and why.
func (s *supervisor) startGeneration(gen *generation) ([]*workerProc, error) {
	slots := make([]*workerProc, gen.workers)
	fail := func(err error) ([]*workerProc, error) {
		s.mu.Lock()
		s.starting = nil
		s.mu.Unlock()
		for _, w := range slots {
			if w != nil {
				w.proc.kill()
				<-w.exited
			}
		}
		return nil, err
	}
	for slot := range slots {
		w, err := s.startWorker(slot, gen)
		if err != nil {
			return fail(err)
		}
		slots[slot] = w
		s.mu.Lock()
		s.starting = append(s.starting, w)
		s.mu.Unlock()
	}
	for _, w := range slots {
		if err := w.waitReady(readyTimeout); err != nil {
			return fail(err)
		}
	}
	s.mu.Lock()
	s.starting = nil
	s.mu.Unlock()
	return slots, nil
}

// startWorker spawns a worker for slot of gen and watches for its end.
func (s *supervisor) startWorker(slot int, gen *generation) (*workerProc, error) {
	w, err := s.spawn(slot, gen)
	if err != nil {
		return nil, err
	}
	go s.watch(w)
	return w, nil
}

// watch waits until w has exited and been reaped, then hands it to the master's loop.
func (s *supervisor) watch(w *workerProc) {
	w.exitCode, w.exitErr = w.proc.wait()
	// Folded before it counts as exited, under the lock view takes: a view counts the
	// worker's report or the fold, never both or neither.
	s.mu.Lock()
	if st := w.stats.Load(); st != nil && len(st.HTTP2Abuse) > 0 {
		if s.http2Abuse == nil {
			s.http2Abuse = map[string]uint64{}
		}
		for k, n := range st.HTTP2Abuse {
			s.http2Abuse[k] += n
		}
	}
	w.folded = true
	s.mu.Unlock()
	close(w.exited)
	s.exits <- w
}

// handleExit decides what a reaped worker's end calls for: a respawn into its slot when
// it was a current worker that nobody asked to stop, nothing otherwise.
func (s *supervisor) handleExit(w *workerProc) {
	s.mu.Lock()
	current := w.slot < len(s.slots) && s.slots[w.slot] == w
	stopping := s.stopping
	if !current {
		s.forgetDrainedLocked()
	}
	s.mu.Unlock()
	if stopping || !current || w.draining.Load() {
		return
	}
	s.log.Errorf("worker slot %d (pid %d) exited unexpectedly: %v", w.slot, w.pid, w.exitErr)
	// As in nginx, a worker whose setup failed is not respawned: it would fail the same way.
	if w.exitCode == ipc.FatalExitCode {
		s.log.Errorf("worker slot %d exited with fatal code %d and cannot be respawned", w.slot, ipc.FatalExitCode)
		return
	}
	s.mu.Lock()
	s.restarts++
	gen := s.gen
	s.mu.Unlock()
	delay := s.respawnDelay(w.slot)
	if delay > 0 {
		s.log.Errorf("worker slot %d crashed more than %d times within %v: respawning in %v", w.slot, crashLimit, crashWindow, delay)
		go func() {
			time.Sleep(delay)
			s.respawn(w.slot, gen)
		}()
		return
	}
	s.respawn(w.slot, gen)
}

func (s *supervisor) forgetDrainedLocked() {
	kept := s.draining[:0]
	for _, d := range s.draining {
		if !d.hasExited() {
			kept = append(kept, d)
		}
	}
	s.draining = kept
}

// respawnDelay records a crash of slot and returns how long its respawn must wait.
func (s *supervisor) respawnDelay(slot int) time.Duration {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	recent := s.crashes[slot][:0]
	for _, t := range s.crashes[slot] {
		if now.Sub(t) < crashWindow {
			recent = append(recent, t)
		}
	}
	recent = append(recent, now)
	s.crashes[slot] = recent
	if len(recent) > crashLimit {
		return crashBackOff
	}
	return 0
}

// respawn replaces a dead worker in its slot, on the same sockets, at once: the new
// process inherits the socket and its accept queue, so queued connections are served, not
// lost. Readiness is awaited off the master's loop. A respawn for a generation that has
// been replaced meanwhile, or while the master stops, is dropped.
func (s *supervisor) respawn(slot int, gen *generation) {
	s.mu.Lock()
	if s.stopping || gen != s.gen {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	w, err := s.startWorker(slot, gen)
	if err != nil {
		s.log.Errorf("respawning worker slot %d: %v", slot, err)
		return
	}
	s.mu.Lock()
	if s.gen != gen || s.stopping {
		s.mu.Unlock()
		w.proc.kill()
		return
	}
	s.slots[slot] = w
	s.mu.Unlock()
	go func() {
		if err := w.waitReady(readyTimeout); err != nil {
			s.log.Errorf("respawned worker slot %d: %v", slot, err)
			return
		}
		s.log.Infof("worker slot %d respawned as pid %d", slot, w.pid)
	}()
}

// halt ends respawning, for good, and returns every worker still alive: the current
// generation, one starting and the draining ones.
func (s *supervisor) halt() []*workerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	return append(s.allWorkersLocked(), s.starting...)
}

// stop asks workers to stop, draining first when graceful, and kills those still alive
// after worker_shutdown_timeout and a second (3 s for a fast stop). It returns once every
// one has exited. Call halt first, or a respawn may replace them.
func (s *supervisor) stop(workers []*workerProc, graceful bool) {
	deadline := 3 * time.Second
	if graceful {
		deadline = s.current().cfg.WorkerShutdownTimeout + time.Second
	}
	for _, w := range workers {
		w.shutdown(graceful)
	}
	expired := time.After(deadline)
	for _, w := range workers {
		select {
		case <-w.exited:
		case <-expired:
			for _, w := range workers {
				if !w.hasExited() {
					s.log.Warnf("worker slot %d (pid %d) still alive after %v: killing it", w.slot, w.pid, deadline)
					w.proc.kill()
				}
			}
			for _, w := range workers {
				<-w.exited
			}
		}
	}
}

// kill kills workers and returns once every one has exited.
func (s *supervisor) kill(workers []*workerProc) {
	for _, w := range workers {
		if !w.hasExited() {
			w.proc.kill()
			<-w.exited
		}
	}
}

// current is the current generation; nil before begin.
func (s *supervisor) current() *generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// supervision is a consistent copy of what the supervisor tracks.
type supervision struct {
	gen      *generation
	slots    []*workerProc // the current generation, by slot; nil where a slot has none
	workers  []*workerProc // every live worker: the current generation's and the draining
	restarts uint64
	// http2Abuse totals every worker's HTTP/2 abuse counts, the exited ones' included.
	http2Abuse map[string]uint64
}

func (s *supervisor) view() supervision {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A copy: a respawn writes into s.slots, and the caller reads this one unlocked.
	slots := append([]*workerProc(nil), s.slots...)
	v := supervision{gen: s.gen, slots: slots, workers: s.allWorkersLocked(), restarts: s.restarts}
	for k, n := range s.http2Abuse {
		if v.http2Abuse == nil {
			v.http2Abuse = map[string]uint64{}
		}
		v.http2Abuse[k] = n
	}
	for _, w := range v.workers {
		if st := w.stats.Load(); st != nil && !w.folded {
			for k, n := range st.HTTP2Abuse {
				if v.http2Abuse == nil {
					v.http2Abuse = map[string]uint64{}
				}
				v.http2Abuse[k] += n
			}
		}
	}
	return v
}

// allWorkers lists the current generation and the draining ones still alive.
func (s *supervisor) allWorkers() []*workerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allWorkersLocked()
}

func (s *supervisor) allWorkersLocked() []*workerProc {
	all := s.liveWorkersLocked()
	for _, w := range s.draining {
		if !w.hasExited() {
			all = append(all, w)
		}
	}
	return all
}

func (s *supervisor) liveWorkersLocked() []*workerProc {
	var live []*workerProc
	for _, w := range s.slots {
		if w != nil && !w.hasExited() {
			live = append(live, w)
		}
	}
	return live
}

// serving lists the workers a new snapshot must reach: the current generation's live
// ones and those of a generation starting to replace it.
func (s *supervisor) serving() []*workerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(s.liveWorkersLocked(), s.starting...)
}

// tracks tells whether pid is a worker of any generation the supervisor still tracks.
func (s *supervisor) tracks(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range [][]*workerProc{s.slots, s.starting, s.draining} {
		for _, w := range list {
			if w != nil && w.pid == pid {
				return true
			}
		}
	}
	return false
}
