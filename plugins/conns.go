package plugins

import (
	"errors"
	"fmt"
)

// ConnState is where a client connection stands, whatever protocol it speaks; the
// worker maps its server's events onto these.
type ConnState uint8

const (
	// ConnUnseen is a connection before its first event (the zero value).
	ConnUnseen ConnState = iota
	// ConnNew is accepted, its first request not yet read.
	ConnNew
	// ConnActive is handling a request (HTTP/2: at least one stream open).
	ConnActive
	// ConnIdle is kept alive between requests.
	ConnIdle
	// ConnClosed is closed, or taken over (a websocket tunnel): it is no longer served.
	ConnClosed
)

// ConnWatcher is implemented by a plugin that watches the worker's client connections
// (prometheus's apisix_nginx_http_current_connections). The worker calls ObserveConns
// once, after mapping its segments and before accepting; nil and no error means the
// plugin has nothing to watch in this worker.
type ConnWatcher interface {
	ObserveConns(shared *Shared) (ConnObserver, error)
}

// ConnObserver hears every state change of every client connection. The worker keeps
// each connection's last state and passes it as from: ConnUnseen before ConnNew, and
// never ConnClosed (a closed connection has no more changes). Active follows Active
// when a connection's requests come back to back, one change per request. ConnChanged is
// called on the connection's own goroutine, at least twice a request: it must neither
// block nor allocate.
type ConnObserver interface {
	ConnChanged(from, to ConnState)
}

// ObserveConns starts every ConnWatcher's observer for one worker, in name order. A
// watcher that fails is left out and its error returned with the others': connections
// are served whatever a watcher says.
func ObserveConns(shared *Shared) ([]ConnObserver, error) {
	var observers []ConnObserver
	var errs []error
	for _, p := range registered() {
		w, ok := p.(ConnWatcher)
		if !ok {
			continue
		}
		o, err := w.ObserveConns(shared)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		case o != nil:
			observers = append(observers, o)
		}
	}
	return observers, errors.Join(errs...)
}
