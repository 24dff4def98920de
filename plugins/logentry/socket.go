package logentry

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// Socket is where tcp-logger, udp-logger and syslog write a batch: a connection of its
// own for each, as APISIX's loggers open one per flush, over TCP, TLS on TCP (the
// collector's certificate unverified, as APISIX's logger sockets) or UDP (one datagram).
// Its fields are fixed once built; Write runs on one processor's goroutine.
type Socket struct {
	// Network is "tcp" or "udp"; Addr is host:port.
	Network, Addr string
	// ServerName, when TLS is set, is the name the handshake sends (SNI).
	TLS        bool
	ServerName string
	// Timeout bounds the connect, then the handshake and the write together.
	Timeout time.Duration
	// Peer names the collector in errors: "TCP server", "the syslog server".
	Peer string
}

// Write sends data on a new connection and closes it.
func (s *Socket) Write(data []byte) error {
	conn, err := net.DialTimeout(s.Network, s.Addr, s.Timeout)
	if err != nil {
		return fmt.Errorf("failed to connect to %s %s: %w", s.Peer, s.Addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(s.Timeout))
	if s.TLS {
		tc := tls.Client(conn, &tls.Config{ServerName: s.ServerName, InsecureSkipVerify: true}) //nolint:gosec // as APISIX's logger sockets
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("failed to perform the TLS handshake with %s %s: %w", s.Peer, s.Addr, err)
		}
		conn = tc
	}
	if _, err := conn.Write(data); err != nil {
		return fmt.Errorf("failed to send data to %s %s: %w", s.Peer, s.Addr, err)
	}
	return nil
}
