package health

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gw/conf"
	"gw/shm"
)

// maxProbeBody is how much of a probe's response body is read before the connection is
// closed; the status decides, the body only has to be drained politely.
const maxProbeBody = 64 << 10

// round probes, every interval, the nodes whose health is wantHealthy, as
// lua-resty-healthcheck runs one timer for healthy targets and one for unhealthy ones.
func (p *prober) round(wantHealthy bool, interval time.Duration) {
	defer p.done.Done()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var wg sync.WaitGroup
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-ticker.C:
		}
		for _, n := range p.nodes {
			if p.look(n) != wantHealthy {
				continue
			}
			select {
			case p.slots <- struct{}{}:
			case <-p.ctx.Done():
				wg.Wait()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-p.slots }()
				p.check(n)
			}()
		}
		wg.Wait()
	}
}

// look reads n's health and logs a change that live traffic (passive checks in a worker)
// made since the last look.
func (p *prober) look(n *probedNode) bool {
	healthy := n.entry.Healthy()
	n.mu.Lock()
	changed := healthy != n.lastSeen
	n.lastSeen = healthy
	n.mu.Unlock()
	if changed {
		p.log.Warnf("upstream %s node %s is %s (passive check: live traffic)", p.name, n.addr, stateName(healthy))
	}
	return healthy
}

// check probes n once and counts the answer.
func (p *prober) check(n *probedNode) {
	event, ok := p.probe(p.ctx, n)
	if !ok || p.ctx.Err() != nil {
		return // an answer the check does not count, or the prober is stopping
	}
	changed, healthy := n.entry.Report(event, p.threshold(event))
	if !changed {
		return
	}
	n.mu.Lock()
	n.lastSeen = healthy
	n.mu.Unlock()
	p.log.Warnf("upstream %s node %s is %s (active check: %s)", p.name, n.addr, stateName(healthy), eventName(event))
}

func (p *prober) threshold(e shm.HealthEvent) int {
	switch e {
	case shm.HealthSuccess:
		return p.active.Healthy.Successes
	case shm.HealthHTTPFailure:
		return p.active.Unhealthy.HTTPFailures
	case shm.HealthTCPFailure:
		return p.active.Unhealthy.TCPFailures
	}
	return p.active.Unhealthy.Timeouts
}

// newProbeFunc returns the probe active asks for. A probe returns the event to count, or
// ok false for an HTTP status in neither list.
func newProbeFunc(active *conf.ActiveCheck) func(ctx context.Context, n *probedNode) (shm.HealthEvent, bool) {
	// A timeout conf refuses (only an object that bypassed it can hold one) becomes the
	// nearest one it accepts, never a negative duration (every probe failing at once) or
	// 0 (http.Client's no timeout at all).
	timeout, _ := conf.DurationOf(active.Timeout)
	if active.Type == "tcp" {
		return func(ctx context.Context, n *probedNode) (shm.HealthEvent, bool) {
			return probeTCP(ctx, n.probe, timeout), true
		}
	}
	hc := &httpChecker{active: active, timeout: timeout}
	hc.client = &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			// A fresh connection per probe, as lua-resty-healthcheck does: a probe must
			// find out whether the node still accepts connections.
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: !active.HTTPSVerifyCertificate}, //nolint:gosec // the user's https_verify_certificate
			Proxy:             nil,
		},
		// A redirect is an answer: its status is what the lists are about.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, line := range active.ReqHeaders {
		if name, value, ok := conf.CutHeaderLine(line); ok {
			hc.headers = append(hc.headers, [2]string{name, value})
		}
	}
	return hc.probe
}

// probeTCP connects to addr and closes the connection at once.
func probeTCP(ctx context.Context, addr string, timeout time.Duration) shm.HealthEvent {
	dialer := net.Dialer{Timeout: timeout}
	c, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return failureOf(err)
	}
	c.Close()
	return shm.HealthSuccess
}

type httpChecker struct {
	active  *conf.ActiveCheck
	timeout time.Duration
	client  *http.Client
	headers [][2]string
}

func (hc *httpChecker) probe(ctx context.Context, n *probedNode) (shm.HealthEvent, bool) {
	scheme := "http"
	if hc.active.Type == "https" {
		scheme = "https"
	}
	var body io.Reader
	if hc.active.HTTPReqBody != "" {
		body = strings.NewReader(hc.active.HTTPReqBody)
	}
	req, err := http.NewRequestWithContext(ctx, hc.active.HTTPMethod, scheme+"://"+n.probe+hc.active.HTTPPath, body)
	if err != nil {
		return shm.HealthTCPFailure, true // cannot happen with a decoded path and address
	}
	if hc.active.Host != "" {
		req.Host = hc.active.Host
	}
	req.Header.Set("User-Agent", "gw-health-check")
	for _, h := range hc.headers {
		req.Header.Add(h[0], h[1])
	}
	resp, err := hc.client.Do(req)
	if err != nil {
		return failureOf(err), true
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	resp.Body.Close()
	switch {
	case slices.Contains(hc.active.Healthy.HTTPStatuses, resp.StatusCode):
		return shm.HealthSuccess, true
	case slices.Contains(hc.active.Unhealthy.HTTPStatuses, resp.StatusCode):
		return shm.HealthHTTPFailure, true
	}
	return 0, false
}

// failureOf tells a timeout from any other failure to connect or to get an answer.
func failureOf(err error) shm.HealthEvent {
	var t interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout() {
		return shm.HealthTimeout
	}
	return shm.HealthTCPFailure
}

func stateName(healthy bool) string {
	if healthy {
		return "healthy"
	}
	return "unhealthy"
}

func eventName(e shm.HealthEvent) string {
	switch e {
	case shm.HealthSuccess:
		return "success"
	case shm.HealthHTTPFailure:
		return "HTTP failure"
	case shm.HealthTCPFailure:
		return "TCP failure"
	}
	return "timeout"
}

// intervalUnit is what one unit of an interval lasts: a second, shortened by tests.
var intervalUnit = time.Second

// secondsOf is an interval of n units. n is clamped to conf's 1 to MaxSeconds, so that an
// interval that bypassed conf cannot overflow into the non-positive period NewTicker
// panics on (9223372037 s once did).
func secondsOf(n int) time.Duration {
	return time.Duration(min(max(n, 1), conf.MaxSeconds)) * intervalUnit
}

func itoa(n int) string { return strconv.Itoa(n) }
