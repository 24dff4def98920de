package ipc

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// ProtocolVersion changes whenever a frame's layout or a payload's meaning changes; a peer
// speaking another version is refused at the first frame.
const ProtocolVersion = 1

// MaxPayload bounds one frame. A snapshot of 10,000 routes is a few MiB; anything near this
// limit is a bug or an attack, not a config.
const MaxPayload = 256 << 20

const headerSize = 8

var magic = [2]byte{'g', 'w'}

// Kind says what a frame carries.
type Kind uint8

// The frame kinds. Worker → master: Hello, Ready, Ack, Reject, Stats, Closed. Master →
// worker: Setup, Config, Delta, Shutdown, Reopen, TicketKeys. A new kind changes no other frame,
// so ProtocolVersion stays: a master and its workers are always one binary
// (Hello.Version).
const (
	KindHello    Kind = 1 // worker → master: Hello
	KindSetup    Kind = 2 // master → worker: Setup
	KindConfig   Kind = 3 // master → worker: a whole conf.Snapshot
	KindReady    Kind = 4 // worker → master: serving the snapshot it holds
	KindAck      Kind = 5 // worker → master: Ack, a snapshot version now served
	KindShutdown Kind = 6 // master → worker: Shutdown
	KindReopen   Kind = 7 // master → worker: reopen log files (USR1)
	KindStats    Kind = 8 // worker → master: Stats, about once a second
	// master → worker: TicketKeys, whenever the master rotates the TLS session ticket keys
	KindTicketKeys Kind = 9
	// worker → master: Reject, a snapshot version this worker refused to serve, and why
	KindReject Kind = 10
	// worker → master, once, on a graceful shutdown: it has closed its listeners and will
	// accept no more connections; it still serves those it has
	KindClosed Kind = 11
	// master → worker: a conf.Delta, one write, for a worker serving its From version
	KindDelta Kind = 12
)

// FatalExitCode is the status a worker exits with when respawning it cannot help (its
// setup is bad: a socket it cannot use, a log it cannot open). It is not 2, Go's status for
// a panic: a worker that panics is respawned like any other that dies.
const FatalExitCode = 78 // EX_CONFIG in sysexits.h

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindSetup:
		return "setup"
	case KindConfig:
		return "config"
	case KindReady:
		return "ready"
	case KindAck:
		return "ack"
	case KindShutdown:
		return "shutdown"
	case KindReopen:
		return "reopen"
	case KindStats:
		return "stats"
	case KindTicketKeys:
		return "ticket-keys"
	case KindReject:
		return "reject"
	case KindClosed:
		return "closed"
	case KindDelta:
		return "delta"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Errors a reader may get besides io.EOF.
var (
	ErrBadMagic   = errors.New("ipc: bad frame magic")
	ErrVersion    = errors.New("ipc: protocol version mismatch")
	ErrOversized  = errors.New("ipc: frame payload too large")
	ErrClosed     = errors.New("ipc: closed")
	errShortWrite = errors.New("ipc: short write")
)

// Frame is one message.
type Frame struct {
	Kind    Kind
	Payload []byte
}

// Decode unmarshals the frame's JSON payload into v.
func (f Frame) Decode(v any) error {
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("ipc: decoding %s frame: %w", f.Kind, err)
	}
	return nil
}

// Conn is one end of a master–worker channel.
type Conn struct {
	rw     io.ReadWriteCloser
	reader *bufio.Reader
	wmu    sync.Mutex
}

// Pair creates a connected socketpair. The returned Conn stays in this process; the file is
// the other end, to hand to a child through exec.Cmd.ExtraFiles and close here afterwards.
func Pair() (*Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("ipc: socketpair: %w", err)
	}
	local := os.NewFile(uintptr(fds[0]), "ipc-local")
	remote := os.NewFile(uintptr(fds[1]), "ipc-remote")
	conn, err := FromFile(local)
	local.Close() // FromFile holds its own dup
	if err != nil {
		remote.Close()
		return nil, nil, err
	}
	return conn, remote, nil
}

// FromFile wraps an inherited socket (a worker's end of the pair). The file may be closed
// afterwards: the Conn holds its own descriptor.
func FromFile(f *os.File) (*Conn, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("ipc: %s: %w", f.Name(), err)
	}
	return NewConn(c), nil
}

// NewConn wraps any stream; tests use net.Pipe.
func NewConn(rw io.ReadWriteCloser) *Conn {
	return &Conn{rw: rw, reader: bufio.NewReaderSize(rw, 64<<10)}
}

// Send writes one frame. It is safe to call from several goroutines.
func (c *Conn) Send(kind Kind, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("%w: %d bytes", ErrOversized, len(payload))
	}
	var header [headerSize]byte
	header[0], header[1] = magic[0], magic[1]
	header[2] = ProtocolVersion
	header[3] = byte(kind)
	binary.BigEndian.PutUint32(header[4:], uint32(len(payload)))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := writeFull(c.rw, header[:]); err != nil {
		return err
	}
	return writeFull(c.rw, payload)
}

// SendJSON marshals v and sends it as one frame.
func (c *Conn) SendJSON(kind Kind, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("ipc: encoding %s frame: %w", kind, err)
	}
	return c.Send(kind, payload)
}

// Receive reads the next frame. io.EOF means the peer closed its end (or died) between
// frames; io.ErrUnexpectedEOF, in the middle of one.
func (c *Conn) Receive() (Frame, error) {
	var header [headerSize]byte
	if _, err := io.ReadFull(c.reader, header[:]); err != nil {
		return Frame{}, err
	}
	if header[0] != magic[0] || header[1] != magic[1] {
		return Frame{}, ErrBadMagic
	}
	if header[2] != ProtocolVersion {
		return Frame{}, fmt.Errorf("%w: peer speaks %d, we speak %d", ErrVersion, header[2], ProtocolVersion)
	}
	size := binary.BigEndian.Uint32(header[4:])
	if size > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrOversized, size)
	}
	payload, err := readPayload(c.reader, int(size))
	if err != nil {
		return Frame{}, err
	}
	return Frame{Kind: Kind(header[3]), Payload: payload}, nil
}

// firstPayloadChunk is what Receive allocates for a payload before any of it has arrived.
// A larger payload grows as its bytes come in, so a corrupt or hostile length field costs
// memory in proportion to the bytes really sent, not to the length it claims.
const firstPayloadChunk = 1 << 20

// readPayload reads exactly size bytes, doubling its buffer as they arrive.
func readPayload(r io.Reader, size int) ([]byte, error) {
	payload := make([]byte, 0, min(size, firstPayloadChunk))
	for len(payload) < size {
		if len(payload) == cap(payload) {
			payload = slices.Grow(payload, min(size-len(payload), len(payload)))
		}
		n, err := io.ReadFull(r, payload[len(payload):min(size, cap(payload))])
		payload = payload[:len(payload)+n]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return payload, nil
}

// Close closes this end; the peer's next Receive returns io.EOF.
func (c *Conn) Close() error { return c.rw.Close() }

func writeFull(w io.Writer, b []byte) error {
	for len(b) > 0 {
		n, err := w.Write(b)
		if err != nil {
			return err
		}
		if n == 0 {
			return errShortWrite
		}
		b = b[n:]
	}
	return nil
}
