package master

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"gw/ipc"
)

// TLS session ticket keys are the master's, as nginx's ssl_session_ticket_key files are
// shared by its workers: a ticket one worker issued resumes on any other, whichever the
// kernel's SO_REUSEPORT hash picks. The master makes them with crypto/rand and keeps them
// in memory only; they reach a worker in its setup frame and, on every rotation, in a
// KindTicketKeys frame. A reload's new workers get the same set; a binary upgrade hands it
// to the new master in a memfd, which the new master empties once read.
const (
	// ticketKeyRotation is how long one key encrypts new tickets. Short enough that a key
	// stolen from memory opens only half a day of sessions once it has been dropped.
	ticketKeyRotation = 12 * time.Hour
	// ticketResumeWindow is how long a ticket resumes after it was issued, at least: a key
	// is kept for this long after it stopped encrypting. With the rotation above that is
	// three keys, and a ticket lives between 24 and 36 hours.
	ticketResumeWindow = 24 * time.Hour
	// ticketKeySize is crypto/tls's: tls.Config.SetSessionTicketKeys takes [32]byte.
	ticketKeySize = 32
	// maxTicketKeys bounds a handed-over set; the rotation above keeps three.
	maxTicketKeys = 16
)

// ticketKey is one session ticket key and when it began encrypting tickets.
type ticketKey struct {
	secret  [ticketKeySize]byte
	created time.Time
}

// ticketKeySet is one immutable set of keys, newest first. replaced is closed once a newer
// set has taken its place, so that whoever sent this one knows to send again.
type ticketKeySet struct {
	keys     []ticketKey
	replaced chan struct{}
}

// wire is the set as the workers receive it.
func (s *ticketKeySet) wire() [][]byte {
	out := make([][]byte, len(s.keys))
	for i := range s.keys {
		out[i] = s.keys[i].secret[:]
	}
	return out
}

// ticketKeyRing holds the current set of ticket keys and rotates it. Safe for concurrent
// use.
type ticketKeyRing struct {
	mu      sync.Mutex
	current *ticketKeySet
}

// newTicketKeyRing starts from the keys an old master handed over, or from one fresh key
// when there are none, and rotates at once if the handed-over set is due.
func newTicketKeyRing(inherited []ticketKey, now time.Time) *ticketKeyRing {
	keys := inherited
	if len(keys) == 0 {
		keys = []ticketKey{newTicketKey(now)}
	}
	r := &ticketKeyRing{current: &ticketKeySet{keys: keys, replaced: make(chan struct{})}}
	r.rotate(now)
	return r
}

func newTicketKey(now time.Time) ticketKey {
	k := ticketKey{created: now}
	_, _ = rand.Read(k.secret[:]) // crypto/rand never fails: it crashes the program instead
	return k
}

// keySet returns the current set; it never changes, a rotation replaces it.
func (r *ticketKeyRing) keySet() *ticketKeySet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// nextRotation is when the newest key stops encrypting.
func (r *ticketKeyRing) nextRotation() time.Time {
	return r.keySet().keys[0].created.Add(ticketKeyRotation)
}

// rotate, when the newest key has encrypted for ticketKeyRotation, puts a fresh key first
// and drops each key that stopped encrypting ticketResumeWindow ago or more. It reports
// whether the set changed.
func (r *ticketKeyRing) rotate(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current.keys
	if now.Sub(old[0].created) < ticketKeyRotation {
		return false
	}
	keys := []ticketKey{newTicketKey(now)}
	// Key i stopped encrypting when key i-1 started; the newest old key stops now.
	retired := now
	for _, k := range old {
		if now.Sub(retired) >= ticketResumeWindow {
			break
		}
		keys = append(keys, k)
		retired = k.created
	}
	close(r.current.replaced)
	r.current = &ticketKeySet{keys: keys, replaced: make(chan struct{})}
	return true
}

// initTicketKeys takes the old master's keys after an upgrade, or makes new ones, and
// starts rotating them. Losing the old keys costs each client one full handshake, so a
// hand-over that cannot be read is logged, not fatal.
func (m *Master) initTicketKeys() error {
	var inherited []ticketKey
	f, err := m.inherited(handOverTicketKeys)
	if err != nil {
		return err
	}
	if f != nil {
		inherited, err = readTicketKeysFile(f)
		f.Close()
		if err != nil {
			m.log.Errorf("TLS session ticket keys handed over by the old master: %v; starting with new keys, so sessions resume again only after one full handshake", err)
			inherited = nil
		}
	}
	m.tickets = newTicketKeyRing(inherited, time.Now())
	stop := make(chan struct{})
	m.stopTickets = sync.OnceFunc(func() { close(stop) })
	go m.rotateTicketKeys(stop)
	return nil
}

// rotateTicketKeys rotates the keys when due until stop is closed; each worker's
// forwardTicketKeys sends the new set.
func (m *Master) rotateTicketKeys(stop <-chan struct{}) {
	for {
		timer := time.NewTimer(time.Until(m.tickets.nextRotation()))
		select {
		case <-timer.C:
			if m.tickets.rotate(time.Now()) {
				m.log.Infof("rotated the TLS session ticket keys")
			}
		case <-stop:
			timer.Stop()
			return
		}
	}
}

// forwardTicketKeys sends w every set that replaces sent, the one its setup frame held,
// until w exits. One goroutine per worker: a rotation never waits for a slow worker, and a
// worker started during a rotation cannot miss it.
func (m *Master) forwardTicketKeys(w *workerProc, sent *ticketKeySet) {
	for {
		select {
		case <-sent.replaced:
			sent = m.tickets.keySet()
			// A failed send means the worker is gone; its exit is handled where it is reaped.
			if err := w.conn.SendJSON(ipc.KindTicketKeys, ipc.TicketKeys{Keys: sent.wire()}); err != nil {
				return
			}
		case <-w.exited:
			return
		}
	}
}

// The hand-over's layout: magic, version, key count, then per key the time it was created
// (Unix nanoseconds) and the key, all big-endian.
const (
	ticketKeysMagic   = "gwtk"
	ticketKeysVersion = 1
	ticketKeysHeader  = len(ticketKeysMagic) + 2
	ticketKeyRecord   = 8 + ticketKeySize
)

var errTicketKeys = errors.New("master: bad ticket key hand-over")

func encodeTicketKeys(keys []ticketKey) []byte {
	b := make([]byte, 0, ticketKeysHeader+len(keys)*ticketKeyRecord)
	b = append(b, ticketKeysMagic...)
	b = append(b, ticketKeysVersion, byte(len(keys)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint64(b, uint64(k.created.UnixNano()))
		b = append(b, k.secret[:]...)
	}
	return b
}

func decodeTicketKeys(b []byte) ([]ticketKey, error) {
	if len(b) < ticketKeysHeader || string(b[:len(ticketKeysMagic)]) != ticketKeysMagic {
		return nil, fmt.Errorf("%w: no %q header in %d bytes", errTicketKeys, ticketKeysMagic, len(b))
	}
	if v := b[len(ticketKeysMagic)]; v != ticketKeysVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errTicketKeys, v, ticketKeysVersion)
	}
	n := int(b[len(ticketKeysMagic)+1])
	if n < 1 || n > maxTicketKeys {
		return nil, fmt.Errorf("%w: %d keys, want 1 to %d", errTicketKeys, n, maxTicketKeys)
	}
	if want := ticketKeysHeader + n*ticketKeyRecord; len(b) != want {
		return nil, fmt.Errorf("%w: %d keys need %d bytes, got %d", errTicketKeys, n, want, len(b))
	}
	keys := make([]ticketKey, n)
	for i := range keys {
		rec := b[ticketKeysHeader+i*ticketKeyRecord:]
		keys[i].created = time.Unix(0, int64(binary.BigEndian.Uint64(rec)))
		copy(keys[i].secret[:], rec[8:ticketKeyRecord])
	}
	return keys, nil
}

// ticketKeysFile puts keys in a new memfd for the new master: anonymous memory, never a
// file on disk, and close-on-exec so no worker inherits it.
func ticketKeysFile(keys []ticketKey) (*os.File, error) {
	fd, err := unix.MemfdCreate("gw-ticket-keys", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the TLS session ticket keys: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gw-ticket-keys")
	if _, err := f.WriteAt(encodeTicketKeys(keys), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd for the TLS session ticket keys: %w", err)
	}
	return f, nil
}

// readTicketKeysFile reads the old master's keys and empties the memfd, which tableflip
// keeps open in both masters: the keys must not outlive their rotation there.
func readTicketKeysFile(f *os.File) ([]ticketKey, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, int64(ticketKeysHeader+maxTicketKeys*ticketKeyRecord+1)))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		return nil, fmt.Errorf("emptying: %w", err)
	}
	return decodeTicketKeys(b)
}

// registerTicketKeys hands the current keys to the new master in a memfd. The caller
// empties the memfd with emptyAndClose once the upgrade is over, either way.
func (m *Master) registerTicketKeys() (*os.File, error) {
	f, err := ticketKeysFile(m.tickets.keySet().keys)
	if err != nil {
		return nil, err
	}
	if err := m.upg.AddFile(handOverTicketKeys, f); err != nil {
		emptyAndClose(f)
		return nil, fmt.Errorf("handing over %s: %w", handOverTicketKeys, err)
	}
	return f, nil
}

// emptyAndClose empties a hand-over memfd, so that no process holding it (tableflip keeps
// a copy in each master) keeps the keys, and closes this copy.
func emptyAndClose(f *os.File) {
	_ = f.Truncate(0)
	_ = f.Close()
}
