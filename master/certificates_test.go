package master

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gw/conf"
	"gw/internal/testcert"
)

func certPEM(t *testing.T, name string, notAfter time.Time) string {
	t.Helper()
	return testcert.SelfSigned(t, testcert.Options{Names: []string{name}, NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}).CertPEM
}

// An expired certificate is warned of once, naming the ssl, its SNIs and the date, and
// every ssl's earliest NotAfter is exported per SNI.
func TestCertificateExpiries(t *testing.T) {
	expired := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	soon := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second)
	later := soon.Add(24 * time.Hour)
	ssls := []conf.SSL{
		{ID: "old", SNIs: []string{"old.example.com", "*.old.example.com"}, Cert: certPEM(t, "old.example.com", expired)},
		{ID: "two", SNI: "two.example.com", Cert: certPEM(t, "two.example.com", later), Certs: []string{certPEM(t, "two.example.com", soon)}},
		{ID: "client", Type: conf.SSLTypeClient, Cert: certPEM(t, "gw-client", later)},
		{ID: "unresolved", SNI: "u.example.com", Cert: "$env://GW_UNSET"},
	}
	var warnings []string
	warnf := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	var c certExpiries
	c.reset(ssls, warnf)
	c.reset(ssls, warnf) // a second start of the same snapshot (a reload) warns no more
	if len(warnings) != 1 || !strings.Contains(warnings[0], "ssl old (snis [old.example.com *.old.example.com]): its certificate expired on "+expired.UTC().Format(time.RFC3339)) {
		t.Errorf("warnings = %q, want one naming ssl old, its snis and %s", warnings, expired.UTC().Format(time.RFC3339))
	}
	var page strings.Builder
	c.writeMetrics(&page)
	want := fmt.Sprintf("# TYPE %[1]s gauge\n"+
		"%[1]s{id=\"client\",sni=\"\"} %[2]d\n"+
		"%[1]s{id=\"old\",sni=\"old.example.com\"} %[3]d\n"+
		"%[1]s{id=\"old\",sni=\"*.old.example.com\"} %[3]d\n"+
		"%[1]s{id=\"two\",sni=\"two.example.com\"} %[4]d\n", certExpiryMetric, later.Unix(), expired.Unix(), soon.Unix())
	if !strings.HasSuffix(page.String(), want) {
		t.Errorf("metrics:\n%s\nwant them to end with:\n%s", page.String(), want)
	}

	c.apply([]conf.Change{{Kind: "ssls", ID: "old"}, conf.ChangeOf("ssls", "new", &conf.SSL{ID: "new", SNI: "new.example.com", Cert: certPEM(t, "new.example.com", expired)})}, warnf)
	page.Reset()
	c.writeMetrics(&page)
	if strings.Contains(page.String(), `id="old"`) || !strings.Contains(page.String(), fmt.Sprintf(`%s{id="new",sni="new.example.com"} %d`, certExpiryMetric, expired.Unix())) {
		t.Errorf("after deleting old and putting new:\n%s", page.String())
	}
	if len(warnings) != 2 || !strings.Contains(warnings[1], "ssl new (snis [new.example.com])") {
		t.Errorf("warnings = %q, want a second one for ssl new", warnings)
	}
}
