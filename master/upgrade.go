package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/tableflip"
)

// A binary upgrade (gwctl upgrade, USR2) hands everything that must outlive the old
// master to a new master started from the binary now on disk: the data-plane sockets (all
// N per address, as named files: tableflip keys its listeners by address, which cannot
// hold N sockets of one address), the shared-memory segments, the admin and metrics
// listeners, the instance lock and the TLS session ticket keys (in a memfd, tickets.go).
// The new master starts its workers; once they are ready it tells the old one, which
// drains its workers and exits at once, leaving the pid file, the sockets and the segments
// to the new master.

// File names in the hand-over.
const (
	handOverLock    = "lock"
	handOverAdmin   = "admin"
	handOverMetrics = "metrics"
	// handOverTicketKeys is a memfd the old master fills at the upgrade and the new one
	// empties once read.
	handOverTicketKeys = "tls ticket keys"
)

func handOverSocket(address string, slot int) string {
	return "listen " + address + " #" + strconv.Itoa(slot)
}

func handOverSegment(plugin string) string { return "shm " + plugin }

// initUpgrader creates the process's one tableflip.Upgrader. In a master started by an
// upgrade it also finds the old master's files.
func (m *Master) initUpgrader() error {
	upg, err := tableflip.New(tableflip.Options{UpgradeTimeout: m.upgradeTimeout()})
	if err != nil {
		return fmt.Errorf("binary upgrade support: %w", err)
	}
	m.upg = upg
	return nil
}

func (m *Master) upgradeTimeout() time.Duration {
	if m.opts.UpgradeTimeout > 0 {
		return m.opts.UpgradeTimeout
	}
	return time.Minute
}

// isUpgradeChild reports whether an old master started this one.
func (m *Master) isUpgradeChild() bool { return m.upg != nil && m.upg.HasParent() }

// inherited returns a file the old master handed over, or nil.
func (m *Master) inherited(name string) (*os.File, error) {
	if !m.isUpgradeChild() {
		return nil, nil
	}
	f, err := m.upg.File(name)
	if err != nil {
		return nil, fmt.Errorf("inherited %s: %w", name, err)
	}
	return f, nil
}

// inheritedSockets returns the old master's sockets for address, in slot order.
func (m *Master) inheritedSockets(address string) (*slotSockets, error) {
	set := &slotSockets{address: address}
	for slot := 0; ; slot++ {
		f, err := m.inherited(handOverSocket(address, slot))
		if err != nil {
			set.close()
			return nil, err
		}
		if f == nil {
			break
		}
		set.files = append(set.files, f)
	}
	if len(set.files) == 0 {
		return nil, nil
	}
	return set, nil
}

// listenTCP opens a master-side listener (admin, metrics), or takes the old master's.
func (m *Master) listenTCP(name, address string) (net.Listener, error) {
	f, err := m.inherited(name)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	if f != nil {
		ln, err = net.FileListener(f)
		f.Close()
		if err == nil && ln.Addr().String() != address {
			// The address changed with the new config: the old socket is not ours to keep.
			ln.Close()
			ln, err = listenStream(address)
		}
	} else {
		ln, err = listenStream(address)
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.handOverListeners[name] = ln
	m.mu.Unlock()
	return ln, nil
}

// registerHandOver lists every file the new master needs with tableflip.
func (m *Master) registerHandOver() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	add := func(name string, f *os.File) error {
		if err := m.upg.AddFile(name, f); err != nil {
			return fmt.Errorf("handing over %s: %w", name, err)
		}
		return nil
	}
	if err := add(handOverLock, m.lock); err != nil {
		return err
	}
	for address, set := range m.sockets {
		for slot, f := range set.files {
			if err := add(handOverSocket(address, slot), f); err != nil {
				return err
			}
		}
	}
	for name, seg := range m.segments {
		if err := add(handOverSegment(name), seg.File()); err != nil {
			return err
		}
	}
	for name, ln := range m.handOverListeners {
		tcp, ok := ln.(*net.TCPListener)
		if !ok {
			continue
		}
		f, err := tcp.File() // a dup; the listener keeps serving until the hand-over ends
		if err != nil {
			return fmt.Errorf("handing over %s: %w", name, err)
		}
		err = add(name, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// childArgs are the new master's arguments: the binary's path on disk (tableflip starts
// os.Args[0]), a foreground start, and this master's prefix and --workers.
func (m *Master) childArgs() []string {
	args := []string{m.binary, "start", "--foreground", "--prefix", m.paths.Prefix,
		"--binary", m.binary, "--upgrade-timeout", m.upgradeTimeout().String()}
	if m.opts.Workers > 0 {
		args = append(args, "--workers", strconv.Itoa(m.opts.Workers))
	}
	if m.opts.Stderr == nil {
		args = append(args, "--no-stderr")
	}
	return args
}

// errUpgradeInProgress refuses writes while the store changes hands.
var errUpgradeInProgress = errors.New("a binary upgrade is in progress")

// upgrade replaces this master with one started from the binary now on disk. On success
// the caller must hand over and exit; on failure this master serves on as before.
func (m *Master) upgrade() (newPID int, err error) {
	if m.upg == nil {
		return 0, errors.New("binary upgrades are not available on this platform")
	}
	if m.isUpgradeChild() {
		// tableflip knows, from a pipe the old master holds until it exits (a pid check
		// would be fooled by a zombie nobody has reaped yet).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := m.upg.WaitForParent(ctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("the previous master (pid %d) is still handing over; try again once it has exited", m.parentPID)
		}
	}
	if _, err := os.Stat(m.binary); err != nil {
		return 0, fmt.Errorf("new binary: %w", err)
	}
	// From here on the Admin API answers writes with 503 and Retry-After: a write taken
	// now might never reach the new master, which reads the store once at start.
	m.readOnly.Store(true)
	m.publishMu.Lock()
	m.publishMu.Unlock() // a publication in flight has finished
	logStart := fileSize(m.paths.ErrorLog)
	if err := m.registerHandOver(); err != nil {
		m.readOnly.Store(false)
		return 0, err
	}
	ticketKeys, err := m.registerTicketKeys()
	if err != nil {
		m.readOnly.Store(false)
		return 0, err
	}
	saved := os.Args
	os.Args = m.childArgs()
	m.log.Infof("upgrading: starting %s", m.binary)
	err = m.upg.Upgrade()
	os.Args = saved
	// A new master that took over has read the keys already; one that failed never will.
	emptyAndClose(ticketKeys)
	if err != nil {
		m.readOnly.Store(false)
		reason := lastLinesSince(m.paths.ErrorLog, logStart, 3, fmt.Sprintf(" %d#", m.pid))
		if reason != "" {
			return 0, fmt.Errorf("the new binary did not take over (%v); this master keeps serving. The new binary said:\n%s", err, reason)
		}
		return 0, fmt.Errorf("the new binary did not take over (%v); this master keeps serving", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readSmallFile(m.paths.PIDFile)))
	return pid, nil
}

// handOver ends this master after a successful upgrade: its workers drain on their own
// (a draining worker outlives its master), and nothing the new master now owns is removed.
func (m *Master) handOver() {
	m.mu.Lock()
	m.handedOver = true
	m.mu.Unlock()
	workers := m.sup.halt()
	for _, w := range workers {
		w.shutdown(true)
	}
	m.log.Infof("handed over to the new master; %d workers drain on their own", len(workers))
	m.teardown()
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func readSmallFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// lastLinesSince returns the last n lines appended to path after offset, leaving out the
// lines that contain skip (this master's own).
func lastLinesSince(path string, offset int64, n int, skip string) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= offset {
		return ""
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(b[offset:])), "\n") {
		if !strings.Contains(line, skip) {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
