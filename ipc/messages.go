package ipc

// Hello is a worker's first frame. The master refuses a worker built from another version,
// which can only happen if the binary was swapped under a running master.
type Hello struct {
	PID        int    `json:"pid"`
	Slot       int    `json:"slot"`
	Generation uint64 `json:"generation"`
	Version    string `json:"version"`
}

// Setup is the master's first frame to a worker: what it needs before it can serve.
// Config is the static configuration as JSON (conf.Config); ListenerFDs maps each inherited
// descriptor to the address it listens on.
type Setup struct {
	Config      []byte       `json:"config"`
	ListenerFDs []ListenerFD `json:"listener_fds"`
	AdminSocket string       `json:"admin_socket"`
	// ErrorLog is the path a worker reopens as its stdout and stderr on KindReopen.
	ErrorLog string `json:"error_log"`
	// Prefix is the instance directory relative paths in the config are under.
	Prefix string `json:"prefix"`
	// SegmentFDs maps inherited shared-memory segments to the plugins that own them.
	SegmentFDs []SegmentFD `json:"segment_fds"`
	// TicketKeys are the TLS session ticket keys every worker shares, as in TicketKeys.Keys.
	TicketKeys [][]byte `json:"ticket_keys"`
}

// ConnFD is the descriptor a worker finds its end of the IPC socketpair on: the first
// after stdio (exec.Cmd.ExtraFiles[0]). The listening sockets and shared-memory segments
// it inherits follow it, and Setup names each one's number (ListenerFDs, SegmentFDs).
const ConnFD = 3

// SegmentFD names one inherited shared-memory segment.
type SegmentFD struct {
	FD     int    `json:"fd"`
	Plugin string `json:"plugin"`
}

// ListenerFD names one inherited listening socket.
type ListenerFD struct {
	FD      int    `json:"fd"`
	Address string `json:"address"`
	Slot    int    `json:"slot"`
}

// Ack says the worker now serves this snapshot version.
type Ack struct {
	Version uint64 `json:"version"`
}

// Reject says a worker refused a snapshot and keeps serving the one it had: Reason names
// each object it could not build. The master checked the snapshot before sending it, so a
// Reject means the two processes disagree, and the master reports it until a later
// snapshot is served.
type Reject struct {
	Version uint64 `json:"version"`
	Reason  string `json:"reason"`
}

// ShutdownMode says how a worker should stop.
type ShutdownMode string

// The shutdown modes: Graceful drains (nginx QUIT), Fast stops now (nginx TERM).
const (
	Graceful ShutdownMode = "graceful"
	Fast     ShutdownMode = "fast"
)

// Shutdown asks a worker to stop.
type Shutdown struct {
	Mode ShutdownMode `json:"mode"`
}

// Stats is a worker's periodic report, for `gwctl status`.
type Stats struct {
	Requests    uint64 `json:"requests"`
	Connections int64  `json:"connections"`
	// HTTP2Abuse counts the HTTP/2 connections the worker cut off, by kind
	// (gw_http2_abuse_total); nil while there are none.
	HTTP2Abuse map[string]uint64 `json:"http2_abuse,omitempty"`
}

// TicketKeys is the whole set of TLS session ticket keys, newest first: the first encrypts
// new tickets (TLS 1.2) and PSK identities (TLS 1.3), every one decrypts. Each is 32 random
// bytes. The master holds them in memory only and sends the whole set to every worker at
// setup and on each rotation, so a ticket one worker issued resumes on any other.
type TicketKeys struct {
	Keys [][]byte `json:"keys"`
}
