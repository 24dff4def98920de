package limitconn

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"gw/plugins"
	"gw/shm"
)

// The limit-conn segment is one keyed table (shm.KeyedTable) holding three kinds of
// entry, told apart by their payload (56 bits):
//
//	count    count(16) << 39                              a key's requests in flight
//	ledger   count(16) << 39 | 1<<38 | ledger(8) << 30 |  what one process holds of a
//	         gen(8) << 22 | slot(22)                      count: the count's slot, by name
//	owner    1<<55 | ledger(8) << 22 | pid(22)            which process owns a ledger
//
// A count or ledger entry whose count is 0 is idle, and its slot may go to another key;
// owners are never idle while they hold a pid. Each process that serves limit-conn claims
// a ledger number (an owner entry with its pid) and keeps, beside every count it adds to,
// its own count of it in a ledger entry (keyed by the count's fingerprint and the ledger
// number). When a worker dies, the master's part (WorkerExited, before the reap, while no
// other process can have the pid) finds its ledger, takes each ledger count back from the
// count it names, and frees the ledger.
//
// Crashes. Each step is one compare-and-swap, so a process killed between two of them
// leaves at most one count off by one per key it was changing, and always high, never
// low: a request's place is written in the ledger before the count, and given back to the
// count before the ledger; a ledger that says more than the count got makes the master
// give back more than was taken, which a count never below 0 absorbs. So a dead worker's
// slots are freed when the master reaps it, bounded by the reap (milliseconds after the
// exit), and never leak; the error is at most one extra request in flight, per key the
// worker was changing as it died, until that key's count next reaches 0. A process that
// finds no free ledger (256 processes serving at once) counts without one, and what it
// holds when killed stays held: Build logs that once. A ledger whose owner died unreaped
// (a master's own, from checking writes, after an upgrade) is given back and taken over
// by the next process to claim one.
const (
	countShift  = 39
	countMax    = 1<<16 - 1
	countUnit   = uint64(1) << countShift
	ledgerFlag  = uint64(1) << 38
	ledgerShift = 30
	genShift    = 22
	slotMask    = 1<<22 - 1
	ownerFlag   = uint64(1) << 55
	ownerShift  = 22
	pidMask     = 1<<22 - 1
	maxLedgers  = 256
	// idleBelow is what the table's Insert takes as idle: a count of 0.
	idleBelow = countUnit
)

// maxSlots is the most slots a count's name holds (22 bits): shm.limit_conn's bound.
const maxSlots = slotMask + 1

func countOf(payload uint64) uint64 { return payload >> countShift & countMax }

// ledgerPayload names count entry e under ledger, with count n.
func ledgerPayload(ledger uint64, e shm.Entry, n uint64) uint64 {
	slot, gen := e.Slot()
	return n<<countShift | ledgerFlag | ledger<<ledgerShift | uint64(gen)<<genShift | uint64(slot)
}

// ownerKey is the fingerprint of ledger's owner entry, and ledgerKey that of ledger's
// entry for the count of fingerprint fp.
func ownerKey(t *shm.KeyedTable, ledger uint64) uint64 {
	h := t.KeyHash()
	h.WriteString("owner\x00")
	h.WriteByte(byte(ledger))
	return h.Sum()
}

func ledgerKey(t *shm.KeyedTable, fp, ledger uint64) uint64 {
	h := t.KeyHash()
	h.WriteString("ledger\x00")
	var b [9]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(fp >> (8 * i))
	}
	b[8] = byte(ledger)
	h.Write(b[:])
	return h.Sum()
}

// ledgers are this process's ledger numbers, one per segment it maps (one in a gateway,
// several in tests): a process's, not a snapshot's, so it lives for the process.
var ledgers sync.Map // *shm.Segment -> ledgerClaim

type ledgerClaim struct {
	n  uint64
	ok bool
}

// claimLedger returns this process's ledger number in t, claiming a free one the first
// time; false when every one is taken by a live process.
func claimLedger(seg *shm.Segment, t *shm.KeyedTable, nanos int64) (uint64, bool) {
	if c, ok := ledgers.Load(seg); ok {
		return c.(ledgerClaim).n, c.(ledgerClaim).ok
	}
	pid := uint64(os.Getpid()) & pidMask
	claim := ledgerClaim{}
	for n := uint64(0); n < maxLedgers && !claim.ok; n++ {
		mine := ownerFlag | n<<ownerShift | pid
		e, existed, ok := t.Insert(ownerKey(t, n), mine, idleBelow, false, nanos)
		if !ok {
			continue
		}
		if !existed {
			claim = ledgerClaim{n, true}
			break
		}
		p, _ := e.Load()
		switch {
		case p == mine:
			claim = ledgerClaim{n, true}
		case p < idleBelow && e.CompareAndSwap(p, mine):
			claim = ledgerClaim{n, true}
		case p&ownerFlag != 0 && !alive(p&pidMask) && e.CompareAndSwap(p, mine):
			// Its owner died with no master to reap it (a master's own ledger, from
			// checking writes, outlives it after an upgrade): what it held is given
			// back before the ledger is used again. A zombie is alive here, so this
			// never races the master's release of a worker it is reaping.
			var owned [maxLedgers]bool
			owned[n] = true
			releaseEntries(t, &owned)
			claim = ledgerClaim{n, true}
		}
	}
	actual, _ := ledgers.LoadOrStore(seg, claim)
	c := actual.(ledgerClaim)
	return c.n, c.ok
}

// StartMaster starts the part that gives back what dead workers held.
func (plugin) StartMaster(env *plugins.MasterEnv) (plugins.MasterInstance, error) {
	seg := env.Segments[Name]
	if seg == nil {
		return nil, fmt.Errorf("no shared memory segment for %s", Name)
	}
	t, err := shm.OpenKeyedTable(seg, tableMagic)
	if err != nil {
		return nil, err
	}
	logf := env.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &master{table: t, logf: logf}, nil
}

var _ plugins.MasterPart = plugin{}

// master is limit-conn's part in the master.
type master struct {
	table *shm.KeyedTable
	logf  func(format string, args ...any)
	mu    sync.Mutex // one release at a time: two exits do not walk the table at once
}

// WorkerExited gives back every request in flight the dead worker's ledger names, and
// frees the ledger. It reads the table twice, about a millisecond per 10 MB.
func (m *master) WorkerExited(pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	released, keys := releaseLedgers(m.table, uint64(pid)&pidMask)
	if released > 0 {
		m.logf("limit-conn: worker %d exited holding %d requests in flight on %d keys; given back", pid, released, keys)
	}
}

func (m *master) Close() {}

// releaseLedgers gives back what pid's ledgers hold and frees them, owners last.
func releaseLedgers(t *shm.KeyedTable, pid uint64) (released, keys uint64) {
	var owned [maxLedgers]bool
	var owners []shm.Entry
	t.Range(func(e shm.Entry, p uint64) bool {
		if p&ownerFlag != 0 && p&pidMask == pid {
			owned[p>>ownerShift&(maxLedgers-1)] = true
			owners = append(owners, e)
		}
		return true
	})
	if len(owners) == 0 {
		return 0, 0
	}
	released, keys = releaseEntries(t, &owned)
	for _, o := range owners {
		for {
			p, ok := o.Load()
			if !ok || p&ownerFlag == 0 || p&pidMask != pid || o.CompareAndSwap(p, 0) {
				break
			}
		}
	}
	return released, keys
}

// releaseEntries gives back what the owned ledgers hold: each ledger entry's count is
// taken from the count it names (if that slot still has the same key), then the ledger
// entry is zeroed.
func releaseEntries(t *shm.KeyedTable, owned *[maxLedgers]bool) (released, keys uint64) {
	t.Range(func(e shm.Entry, p uint64) bool {
		if p&ownerFlag != 0 || p&ledgerFlag == 0 || !owned[p>>ledgerShift&(maxLedgers-1)] {
			return true
		}
		n := countOf(p)
		if n > 0 {
			if count, ok := t.EntryAt(uint32(p&slotMask), uint8(p>>genShift)); ok {
				take(count, n)
			}
			released += n
			keys++
		}
		for !e.CompareAndSwap(p, 0) {
			if p, _ = e.Load(); p&ledgerFlag == 0 {
				break
			}
		}
		return true
	})
	return released, keys
}

// alive reports whether process pid exists (a zombie does).
func alive(pid uint64) bool {
	err := syscall.Kill(int(pid), 0)
	return err == nil || err == syscall.EPERM
}

// take takes n from a count or ledger entry's count, never below 0; false when the slot is
// no longer the key's.
func take(e shm.Entry, n uint64) bool {
	for {
		p, ok := e.Load()
		if !ok {
			return false
		}
		if e.CompareAndSwap(p, p-min(countOf(p), n)<<countShift) {
			return true
		}
	}
}
