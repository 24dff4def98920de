package httplogger

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"

	"github.com/valyala/fasthttp"

	"gw/plugins/batch"
)

// sender POSTs batches to the collector over a kept-alive connection (fasthttp's
// client: the body goes out as it is, in one write, where net/http copied it through a
// 32 KB buffer of its own per POST); one per instance, used by its processor's goroutine
// only.
type sender struct {
	cfg    *Config
	client *fasthttp.HostClient
	req    fasthttp.Request
	resp   fasthttp.Response
}

// maxAnswer bounds the collector's answer: a larger one is a failed send.
const maxAnswer = 1 << 20

func newSender(cfg *Config) *sender {
	u, _ := url.Parse(cfg.URI) // Parse checked it
	tls := u.Scheme == "https"
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if tls {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	s := &sender{cfg: cfg, client: &fasthttp.HostClient{
		Addr:                          addr,
		IsTLS:                         tls,
		TLSConfig:                     tlsConfig(cfg.SSLVerify),
		MaxConns:                      1,
		MaxIdleConnDuration:           cfg.Batch.InactiveTimeout + cfg.Timeout,
		MaxResponseBodySize:           maxAnswer,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		RetryIfErr:                    retryClosed,
	}}
	s.req.Header.SetMethod(fasthttp.MethodPost)
	s.req.SetRequestURI(cfg.URI) // absolute: its scheme, the client's, and its host the Host
	if cfg.AuthHeader != "" {
		s.req.Header.Set("Authorization", cfg.AuthHeader)
	}
	s.req.Header.SetContentType("application/json")
	if cfg.NewLine && cfg.Batch.BatchMaxSize > 1 {
		s.req.Header.SetContentType("text/plain")
	}
	return s
}

// retryClosed sends a POST once more when its connection turned out closed: the
// collector ended a kept-alive connection while it was idle (its keep-alive timeout
// shorter than ours), which the POST finds before any answer. net/http does the same;
// any other failure is the batch's, for the processor's max_retry_count.
func retryClosed(_ *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	closed := errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	return false, attempts == 1 && closed
}

// tlsConfig is an https collector's: its certificate verified only with ssl_verify, as
// APISIX (off by default).
func tlsConfig(verify bool) *tls.Config {
	return &tls.Config{InsecureSkipVerify: !verify} //nolint:gosec // APISIX's ssl_verify, false by default
}

// joined is how http-logger.lua joins a batch: with batch_max_size 1 the entry itself;
// otherwise, concat_method json, a JSON array (application/json, even of one entry),
// new_line, the entries a line each (text/plain).
func joined(cfg *Config) batch.Joined {
	switch {
	case cfg.Batch.BatchMaxSize == 1:
		return batch.Joined{}
	case cfg.NewLine:
		return batch.Joined{Sep: '\n'}
	default:
		return batch.Joined{Open: '[', Sep: ',', Close: ']'}
	}
}

// send POSTs one batch, joined by the processor (joined); a status of 400 or more is a
// failure, retried. body goes out as it is, the processor's buffer: no copy.
func (s *sender) send(body []byte) error {
	s.req.SetBodyRaw(body)
	err := s.client.DoTimeout(&s.req, &s.resp, s.cfg.Timeout)
	s.req.SetBodyRaw(nil) // body is the processor's, not the request's to keep
	status := s.resp.StatusCode()
	s.resp.Reset()
	if err != nil {
		return fmt.Errorf("error while sending data to [%s]: %w", s.cfg.URI, err)
	}
	if status >= 400 {
		return fmt.Errorf("server returned status code[%d] host[%s]", status, s.cfg.URI)
	}
	return nil
}
