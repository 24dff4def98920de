package master

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"gw/conf"
)

// certExpiryMetric is the Unix time at which each ssl's certificate expires. APISIX 3.x's
// prometheus exporter has no such metric (apisix/plugins/prometheus/exporter.lua), so
// the name is gw's own; an alert reads it as
// gw_ssl_certificate_expiry_timestamp_seconds - time() < 14 * 86400.
const certExpiryMetric = "gw_ssl_certificate_expiry_timestamp_seconds"

// certExpiries is when the ssls' certificates expire, as the workers serve them (secret
// references resolved): the metric's series, and the warning for a certificate that has
// expired. An expired certificate is accepted and served, as APISIX and nginx serve one,
// so that a migration never fails on it; the error log and the metric are how it is
// noticed. Its methods are safe for concurrent use; the zero value is ready.
type certExpiries struct {
	mu   sync.Mutex
	byID map[conf.ID]sslExpiry
	// warned holds the "id notAfter" of each expired certificate already logged.
	warned map[string]bool
}

// sslExpiry is one ssl's names and the earliest NotAfter of its certificates, which is
// when clients of some name start to refuse it.
type sslExpiry struct {
	snis     []string
	notAfter time.Time
}

// reset makes ssls, a whole snapshot's (forWorkers), the ones known, warning of each
// expired certificate not warned of before.
func (c *certExpiries) reset(ssls []conf.SSL, warnf func(string, ...any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID = make(map[conf.ID]sslExpiry, len(ssls))
	for i := range ssls {
		c.putLocked(&ssls[i], warnf)
	}
}

// apply updates the ssls a published delta (deltaForWorkers) puts or deletes.
func (c *certExpiries) apply(changes []conf.Change, warnf func(string, ...any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range changes {
		ch := &changes[i]
		switch {
		case ch.SSL != nil:
			c.putLocked(ch.SSL, warnf)
		case ch.Kind == "ssls" && ch.Deleted():
			delete(c.byID, ch.ID)
		}
	}
}

func (c *certExpiries) putLocked(ssl *conf.SSL, warnf func(string, ...any)) {
	var e sslExpiry
	for _, notAfter := range ssl.Expiry() {
		if !notAfter.IsZero() && (e.notAfter.IsZero() || notAfter.Before(e.notAfter)) {
			e.notAfter = notAfter
		}
	}
	if e.notAfter.IsZero() {
		delete(c.byID, ssl.ID) // nothing parses (a reference left unresolved): left out
		return
	}
	e.snis = ssl.Names()
	if c.byID == nil {
		c.byID = map[conf.ID]sslExpiry{}
	}
	c.byID[ssl.ID] = e
	key := string(ssl.ID) + " " + e.notAfter.String()
	if time.Now().After(e.notAfter) && !c.warned[key] {
		if c.warned == nil {
			c.warned = map[string]bool{}
		}
		c.warned[key] = true
		warnf("ssl %s (snis %v): its certificate expired on %s; it is served anyway, as nginx serves it, "+
			"and clients that check dates refuse it: upload its renewal", ssl.ID, e.snis, e.notAfter.UTC().Format(time.RFC3339))
	}
}

// writeMetrics writes the expiry gauge: one series per ssl and SNI (an ssl of type client,
// which has none, with sni=""), the earliest NotAfter of that ssl's certificates, in Unix
// seconds. Without ssls it writes nothing.
func (c *certExpiries) writeMetrics(w io.Writer) {
	c.mu.Lock()
	if len(c.byID) == 0 {
		c.mu.Unlock()
		return
	}
	ids := make([]conf.ID, 0, len(c.byID))
	for id := range c.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s When the ssl's certificate expires (its NotAfter, the earliest of the ssl's certificates), in Unix seconds.\n", certExpiryMetric)
	fmt.Fprintf(&b, "# TYPE %s gauge\n", certExpiryMetric)
	for _, id := range ids {
		e := c.byID[id]
		snis := e.snis
		if len(snis) == 0 {
			snis = []string{""}
		}
		for _, sni := range snis {
			fmt.Fprintf(&b, "%s{id=\"%s\",sni=\"%s\"} %d\n", certExpiryMetric, labelValue(string(id)), labelValue(sni), e.notAfter.Unix())
		}
	}
	c.mu.Unlock()
	io.WriteString(w, b.String()) //nolint:errcheck // a scraper that left has nothing to be told
}

// labelValue escapes a label value as the exposition format asks.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func labelValue(s string) string { return labelEscaper.Replace(s) }
