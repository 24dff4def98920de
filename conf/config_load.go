package conf

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// defaultYAML is the shipped conf/config.yaml. Embedding it makes the documented file and
// the defaults the binary applies one and the same thing.
//
//go:embed config.yaml
var defaultYAML []byte

// defaultSource names the embedded file in error messages.
const defaultSource = "built-in conf/config.yaml"

// maxWorkers guards against a typo that would fork thousands of processes.
const maxWorkers = 1024

// Default returns the defaults, parsed from the embedded conf/config.yaml. Each call returns
// a new Config the caller may change.
func Default() *Config {
	c, err := parseOver(&Config{}, defaultYAML, defaultSource)
	if err != nil {
		panic("BUG: conf: the embedded config.yaml is invalid:\n" + err.Error())
	}
	return c
}

// Load reads the config file at path and merges it over the defaults. A missing file gives
// the defaults. Every problem found is reported, joined into one error with one problem
// per line; each is a *FieldError.
func Load(path string) (*Config, error) {
	c, _, err := LoadState(path)
	return c, err
}

// FileState is what Load found at the config path. Both FileMissing and FileEmpty mean the
// Config is the defaults alone, which `gwctl test` says rather than let a typo in --prefix,
// or a file with every line commented out, pass for a tested configuration.
type FileState int

const (
	FileSetsKeys FileState = iota // the file sets at least one key
	FileMissing                   // there is no file at the path
	FileEmpty                     // the file sets no key: empty, comments only, null or {}
)

// LoadState is Load that also says what it found at path. The state is meaningful only
// when the error is nil.
func LoadState(path string) (*Config, FileState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), FileMissing, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("loading %s: %w", path, err)
	}
	c, setsKeys, err := parseFile(Default(), data, path)
	if err != nil || setsKeys {
		return c, FileSetsKeys, err
	}
	return c, FileEmpty, nil
}

// Parse is Load for a file already in memory; source names it in error messages.
func Parse(data []byte, source string) (*Config, error) {
	return parseOver(Default(), data, source)
}

// Workers resolves worker_processes: auto (0) means one worker per usable CPU.
func (c *Config) Workers() int {
	if c.WorkerProcesses > 0 {
		return c.WorkerProcesses
	}
	return runtime.NumCPU()
}

// AdminKeys returns the configured Admin API keys, or the built-in DefaultAdminKey (role
// admin) when none is configured. Load has already refused the built-in key on a
// non-loopback admin.listen.
func (c *Config) AdminKeys() []AdminKey {
	if len(c.Admin.Keys) > 0 {
		return c.Admin.Keys
	}
	return []AdminKey{{Name: "admin", Key: DefaultAdminKey, Role: RoleAdmin}}
}

// AllowNets returns admin.allow parsed. An entry that does not parse (possible only in a
// Config built by hand) is left out, which can only narrow who is allowed.
func (c *Config) AllowNets() []*net.IPNet {
	nets := make([]*net.IPNet, 0, len(c.Admin.Allow))
	for _, s := range c.Admin.Allow {
		if _, n, err := net.ParseCIDR(s); err == nil {
			nets = append(nets, n)
		}
	}
	return nets
}

// The Admin API roles.
const (
	RoleAdmin  = "admin"  // every method
	RoleViewer = "viewer" // GET only
)

// FieldError is one problem in a config file. Line is 0 when no line is known (a value
// that came from the defaults); Path is the key path, e.g. "admin.keys[1].role".
type FieldError struct {
	Source string
	Line   int
	Path   string
	Msg    string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// parseOver decodes data over c (which holds the values so far), then checks the rules
// that span several keys on the merged result.
func parseOver(c *Config, data []byte, source string) (*Config, error) {
	c, _, err := parseFile(c, data, source)
	return c, err
}

// parseFile is parseOver that also says whether data set any key.
func parseFile(c *Config, data []byte, source string) (_ *Config, setsKeys bool, _ error) {
	l := &loader{source: source, lines: map[string]int{}}
	if root := l.document(data); root != nil {
		l.config(root, c)
	}
	l.crossCheck(c)
	if len(l.errs) > 0 {
		// File order reads best; problems without a line go last.
		sort.SliceStable(l.errs, func(i, j int) bool {
			a, b := l.errs[i].Line, l.errs[j].Line
			return a != 0 && (b == 0 || a < b)
		})
		errs := make([]error, len(l.errs))
		for i, e := range l.errs {
			errs[i] = e
		}
		return nil, true, errors.Join(errs...)
	}
	return c, len(l.lines) > 0, nil
}

// loader walks one YAML file, collecting every problem instead of stopping at the first.
type loader struct {
	source string
	errs   []*FieldError
	// lines records where each key path was set in this file, so that a rule spanning
	// several keys can point at the line the user wrote.
	lines map[string]int
	// keysFailed is set when admin.keys had errors, so crossCheck does not also call it empty.
	keysFailed bool
}

func (l *loader) errorf(line int, path, format string, args ...any) {
	l.errs = append(l.errs, &FieldError{Source: l.source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// yamlLine pulls the line number out of the parser's "yaml: line N: ..." messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data and returns its top-level node, or nil for an empty file or
// one that does not parse (the error is recorded).
func (l *loader) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err != io.EOF {
			l.syntaxError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		l.errorf(extra.Line, "", "a second YAML document (after ---) is not allowed; keep one document per file")
		return nil
	case err != io.EOF:
		l.syntaxError(err)
		return nil
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := yamlDeref(doc.Content[0])
	if isYAMLNull(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		l.errorf(root.Line, "", "the file must be a mapping of keys (worker_processes: ..., node_listen: ...), got %s", describeYAML(root))
		return nil
	}
	l.substituteEnv(root, "", map[*yaml.Node]bool{})
	return root
}

func (l *loader) syntaxError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		l.errorf(line, "", "%s", m[2])
		return
	}
	l.errorf(0, "", "%s", strings.TrimPrefix(msg, "yaml: "))
}

// yamlField is one known key of a mapping and what to do with its value.
type yamlField struct {
	name   string
	decode func(path string, v *yaml.Node)
}

// yamlInto is a yamlField's decode for a key whose value check accepts or reports: what
// it accepts is stored in *dst, and what it refuses leaves the default (as decode.go's
// into does for the Admin API's JSON).
func yamlInto[T any](dst *T, check func(path string, v *yaml.Node) (T, bool)) func(string, *yaml.Node) {
	return func(p string, v *yaml.Node) {
		if x, ok := check(p, v); ok {
			*dst = x
		}
	}
}

// yamlIntInto is yamlInto for an int field whose check (a size, a range) returns an int64
// that fits it.
func yamlIntInto(dst *int, check func(path string, v *yaml.Node) (int64, bool)) func(string, *yaml.Node) {
	return func(p string, v *yaml.Node) {
		if n, ok := check(p, v); ok {
			*dst = int(n)
		}
	}
}

// oneOfThese, sizeIn and intIn are oneOf, size and intRange with their bounds bound, as
// checks for yamlInto.
func (l *loader) oneOfThese(allowed ...string) func(string, *yaml.Node) (string, bool) {
	return func(p string, v *yaml.Node) (string, bool) { return l.oneOf(p, v, allowed...) }
}

func (l *loader) sizeIn(min, max int64) func(string, *yaml.Node) (int64, bool) {
	return func(p string, v *yaml.Node) (int64, bool) { return l.size(p, v, min, max) }
}

func (l *loader) intIn(min, max int64) func(string, *yaml.Node) (int64, bool) {
	return func(p string, v *yaml.Node) (int64, bool) { return l.intRange(p, v, min, max) }
}

// mapping walks a mapping node: unknown and repeated keys are errors, known keys are
// decoded in file order. A null value (a key with everything under it commented out)
// leaves the defaults alone.
func (l *loader) mapping(n *yaml.Node, path string, fields []yamlField) {
	if isYAMLNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.errorf(n.Line, path, "must be a mapping of keys, got %s", describeYAML(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), yamlDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k.Line, path, "keys must be plain names, got %s", describeYAML(k))
			continue
		}
		p := memberPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			l.errorf(k.Line, p, "set twice (first at line %d); keep one", first)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := findYAMLField(fields, k.Value)
		if !ok {
			l.errorf(k.Line, p, "unknown key; known keys here are %s", yamlFieldNames(fields))
			continue
		}
		l.lines[p] = v.Line
		f.decode(p, v)
	}
}

func (l *loader) config(root *yaml.Node, c *Config) {
	l.mapping(root, "", append([]yamlField{
		{"worker_processes", yamlInto(&c.WorkerProcesses, l.workerProcesses)},
		{"node_listen", yamlInto(&c.NodeListen, l.nodeListen)},
		{"admin", func(p string, v *yaml.Node) { l.admin(p, v, &c.Admin) }},
		{"data_dir", yamlInto(&c.DataDir, l.nonEmptyString)},
		{"worker_shutdown_timeout", yamlInto(&c.WorkerShutdownTimeout, l.positiveDuration)},
		{"error_log_level", yamlInto(&c.ErrorLogLevel, l.oneOfThese("debug", "info", "warn", "error"))},
		{"worker_rlimit_nofile", yamlIntInto(&c.WorkerRlimitNofile, l.intIn(1024, 1<<20))},
		{"user", yamlInto(&c.User, l.user)},
		{"access_log", func(p string, v *yaml.Node) { l.accessLog(p, v, &c.AccessLog) }},
		{"shm", func(p string, v *yaml.Node) { l.shm(p, v, &c.Shm) }},
		{"prometheus", func(p string, v *yaml.Node) { l.prometheus(p, v, &c.Prometheus) }},
		{"ssl", func(p string, v *yaml.Node) { l.sslSection(p, v, &c.SSL, &c.UpstreamTrust) }},
		{"http2", func(p string, v *yaml.Node) { l.http2(p, v, &c.HTTP2) }},
		{"status", func(p string, v *yaml.Node) {
			l.mapping(v, p, []yamlField{
				{"enabled", yamlInto(&c.Status.Enabled, l.boolean)},
				{"listen", yamlInto(&c.Status.Listen, l.listenAddr)},
			})
		}},
		{"deployment", func(p string, v *yaml.Node) { l.deployment(p, v, &c.Deployment) }},
		{"plugin_attr", func(p string, v *yaml.Node) { l.pluginAttr(p, v, &c.PluginAttr) }},
		{"router", func(p string, v *yaml.Node) {
			l.mapping(v, p, []yamlField{{"http", func(p string, v *yaml.Node) {
				if s, ok := l.oneOf(p, v, RouterHostURI, RouterURI, RouterURIWithParameter); ok {
					c.Router.HTTP = s
				}
			}}})
		}},
	}, l.edgeFields(&c.Edge)...))
}

func (l *loader) accessLog(path string, n *yaml.Node, a *AccessLog) {
	l.mapping(n, path, []yamlField{
		{"enabled", yamlInto(&a.Enabled, l.boolean)},
		{"path", yamlInto(&a.Path, l.nonEmptyString)},
		{"format", yamlInto(&a.Format, l.oneOfThese("combined", "json"))},
		{"buffer", yamlIntInto(&a.Buffer, l.sizeIn(0, 16<<20))},
		{"flush_interval", yamlInto(&a.FlushInterval, l.positiveDuration)},
	})
}

func (l *loader) shm(path string, n *yaml.Node, s *Shm) {
	l.mapping(n, path, []yamlField{
		{"limit_count", yamlInto(&s.LimitCount, l.sizeIn(64<<10, 16<<30))},
		{"limit_count_on_full", yamlInto(&s.LimitCountOnFull, l.oneOfThese("evict", "reject"))},
		{"metrics", yamlInto(&s.Metrics, l.sizeIn(64<<10, 16<<30))},
		{"health_check", yamlInto(&s.HealthCheck, l.sizeIn(64<<10, 16<<30))},
		{"limit_req", yamlInto(&s.LimitReq, l.sizeIn(64<<10, 16<<30))},
		{"limit_conn", yamlInto(&s.LimitConn, l.sizeIn(64<<10, 64<<20))},
		{"api_breaker", yamlInto(&s.APIBreaker, l.sizeIn(64<<10, 16<<30))},
	})
}

func (l *loader) prometheus(path string, n *yaml.Node, pr *Prometheus) {
	l.mapping(n, path, []yamlField{
		{"enabled", yamlInto(&pr.Enabled, l.boolean)},
		{"export_addr", yamlInto(&pr.ExportAddr, l.listenAddr)},
		{"export_uri", func(p string, v *yaml.Node) {
			if s, ok := l.nonEmptyString(p, v); ok {
				if !strings.HasPrefix(s, "/") {
					l.errorf(v.Line, p, "must start with /, got %q", s)
					return
				}
				pr.ExportURI = s
			}
		}},
		{"max_series", yamlIntInto(&pr.MaxSeries, l.intIn(1, 10_000_000))},
	})
}

func (l *loader) boolean(path string, v *yaml.Node) (bool, bool) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
		return v.Value == "true" || v.Value == "True" || v.Value == "TRUE", true
	}
	l.errorf(v.Line, path, "must be true or false, got %s", describeYAML(v))
	return false, false
}

func (l *loader) intRange(path string, v *yaml.Node, min, max int64) (int64, bool) {
	n, ok := yamlInt(v)
	if !ok || n < min || n > max {
		l.errorf(v.Line, path, "must be an integer from %d to %d, got %s", min, max, describeYAML(v))
		return 0, false
	}
	return n, true
}

// size reads a byte count as nginx writes one: 1048576, 64k, 10m, 1g.
func (l *loader) size(path string, v *yaml.Node, min, max int64) (int64, bool) {
	const forms = "must be a size such as 65536, 64k, 10m or 1g"
	if v.Kind != yaml.ScalarNode || isYAMLNull(v) || v.Value == "" {
		l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
		return 0, false
	}
	text, unit := strings.ToLower(v.Value), int64(1)
	switch text[len(text)-1] {
	case 'k':
		unit, text = 1<<10, text[:len(text)-1]
	case 'm':
		unit, text = 1<<20, text[:len(text)-1]
	case 'g':
		unit, text = 1<<30, text[:len(text)-1]
	}
	n, ok := parseAllDigits(text)
	if !ok || n > max/unit {
		l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
		return 0, false
	}
	n *= unit
	if n < min || n > max {
		l.errorf(v.Line, path, "must be from %d to %d bytes, got %s", min, max, describeYAML(v))
		return 0, false
	}
	return n, true
}

func (l *loader) admin(path string, n *yaml.Node, a *Admin) {
	l.mapping(n, path, []yamlField{
		{"listen", yamlInto(&a.Listen, l.listenAddr)},
		{"keys", yamlInto(&a.Keys, l.adminKeys)},
		{"allow", yamlInto(&a.Allow, l.allow)},
	})
}

func (l *loader) workerProcesses(path string, v *yaml.Node) (int, bool) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == "auto" {
		return 0, true
	}
	n, ok := yamlInt(v)
	if !ok || n < 1 {
		l.errorf(v.Line, path, `must be a positive integer or "auto", got %s`, describeYAML(v))
		return 0, false
	}
	if n > maxWorkers {
		l.errorf(v.Line, path, `must be at most %d, got %d; "auto" runs one worker per CPU`, maxWorkers, n)
		return 0, false
	}
	return int(n), true
}

// nodeListen decodes the data-plane addresses. Two entries that would bind the same socket
// are refused here, where both lines are known.
func (l *loader) nodeListen(path string, v *yaml.Node) ([]string, bool) {
	items, ok := l.list(path, v)
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		l.errorf(v.Line, path, "needs at least one address, e.g. 0.0.0.0:9080")
		return nil, false
	}
	addrs := make([]string, 0, len(items))
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		addr, ok := l.listenAddr(p, item)
		if !ok {
			continue
		}
		l.lines[p] = item.Line
		if j := listenCollision(addr, addrs); j >= 0 {
			l.errorf(item.Line, p, "%q binds the same socket as %s[%d] %q; list each address once", addr, path, j, addrs[j])
			continue
		}
		addrs = append(addrs, addr)
	}
	return addrs, len(addrs) > 0
}

// listenAddr accepts "host:port", "[ipv6]:port", ":port" and a bare port (APISIX's 9080),
// and returns the canonical host:port. An empty host means 0.0.0.0, like a bare port.
func (l *loader) listenAddr(path string, v *yaml.Node) (string, bool) {
	const forms = `must be "host:port", "[ipv6]:port", ":port" or a port number`
	if v.Kind != yaml.ScalarNode || isYAMLNull(v) {
		l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
		return "", false
	}
	host, port := "0.0.0.0", v.Value
	if !decimalDigits(v.Value) {
		var err error
		host, port, err = net.SplitHostPort(v.Value)
		if err != nil {
			l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
			return "", false
		}
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil || portNum == 0 {
		l.errorf(v.Line, path, "port must be 1-65535, got %s", describeYAML(v))
		return "", false
	}
	var addr netip.Addr
	switch host {
	case "":
		addr = netip.IPv4Unspecified()
	case "localhost":
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		addr, err = netip.ParseAddr(host)
		if err != nil {
			l.errorf(v.Line, path, "host must be an IP address or localhost, got %s", describeYAML(v))
			return "", false
		}
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(portNum)).String(), true
}

// adminKeys decodes admin.keys. An empty key is kept for crossCheck, which knows whether
// admin.listen is loopback and so can say how serious it is.
func (l *loader) adminKeys(path string, v *yaml.Node) ([]AdminKey, bool) {
	items, ok := l.list(path, v)
	if !ok {
		l.keysFailed = true
		return nil, false
	}
	keys := make([]AdminKey, 0, len(items))
	names := map[string]int{}   // name → index
	secrets := map[string]int{} // key → index
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		k := AdminKey{Role: RoleAdmin}
		entryOK := item.Kind == yaml.MappingNode || isYAMLNull(item)
		l.mapping(item, p, []yamlField{
			{"name", func(p string, v *yaml.Node) {
				var ok bool
				k.Name, ok = l.nonEmptyString(p, v)
				entryOK = entryOK && ok
			}},
			{"key", func(p string, v *yaml.Node) {
				var ok bool
				k.Key, ok = l.apiKey(p, v)
				entryOK = entryOK && ok
			}},
			{"role", func(p string, v *yaml.Node) {
				role, ok := l.oneOf(p, v, RoleAdmin, RoleViewer)
				if ok {
					k.Role = role
				}
				entryOK = entryOK && ok
			}},
		})
		if item.Kind == yaml.MappingNode || isYAMLNull(item) {
			if _, set := l.lines[p+".name"]; !set {
				l.errorf(item.Line, p, "needs a name (a label for logs), e.g. name: ops")
				entryOK = false
			}
			if _, set := l.lines[p+".key"]; !set {
				l.errorf(item.Line, p, "needs a key (the secret clients send as X-API-KEY)")
				entryOK = false
			}
		}
		if !entryOK {
			l.keysFailed = true
			continue
		}
		if j, dup := names[k.Name]; dup {
			l.errorf(l.lines[p+".name"], p+".name", "%q is already the name of %s[%d]; names must be unique", k.Name, path, j)
			l.keysFailed = true
			continue
		}
		if j, dup := secrets[k.Key]; dup {
			l.errorf(l.lines[p+".key"], p+".key", "is the same as %s[%d].key; give every entry its own key", path, j)
			l.keysFailed = true
			continue
		}
		names[k.Name], secrets[k.Key] = i, i
		keys = append(keys, k)
	}
	if l.keysFailed {
		return nil, false
	}
	if len(keys) == 0 {
		keys = nil // none configured: AdminKeys falls back to the built-in key
	}
	return keys, true
}

// apiKey accepts a key clients can send in a header, a query argument and a cookie alike.
// The empty key is judged later, in crossCheck.
func (l *loader) apiKey(path string, v *yaml.Node) (string, bool) {
	s, ok := l.scalarString(path, v)
	if !ok {
		return "", false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			l.errorf(v.Line, path, "must be printable ASCII without spaces (it travels in the X-API-KEY header), got %q", s)
			return "", false
		}
	}
	return s, true
}

// allow decodes admin.allow into canonical CIDRs, as real_ip_from is (parseCIDROrIP): a
// bare IP means that address alone, and an IPv4-mapped CIDR is written as its IPv4 network.
func (l *loader) allow(path string, v *yaml.Node) ([]string, bool) {
	items, ok := l.list(path, v)
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		l.errorf(v.Line, path, "needs at least one CIDR, or nobody could use the Admin API; write 0.0.0.0/0 and ::/0 to allow everyone")
		return nil, false
	}
	cidrs := make([]string, 0, len(items))
	valid := true
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := l.scalarString(p, item)
		if !ok {
			valid = false
			continue
		}
		prefix, ok := parseCIDROrIP(s)
		if !ok {
			l.errorf(item.Line, p, "must be a CIDR like 10.0.0.0/8 or an IP address, got %q", s)
			valid = false
			continue
		}
		cidrs = append(cidrs, prefix.String())
	}
	return cidrs, valid
}

// positiveDuration accepts a Go duration string ("240s", "4m") or whole seconds (240).
func (l *loader) positiveDuration(path string, v *yaml.Node) (time.Duration, bool) {
	const forms = `must be a duration like "240s" or a whole number of seconds`
	if v.Kind != yaml.ScalarNode || isYAMLNull(v) {
		l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
		return 0, false
	}
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	var d time.Duration
	if v.Tag == "!!int" || decimalDigits(v.Value) {
		secs, ok := yamlInt(v)
		if !ok {
			secs, ok = parseAllDigits(v.Value)
		}
		if !ok || secs > maxSeconds {
			l.errorf(v.Line, path, "must be at most %d seconds, got %s", maxSeconds, describeYAML(v))
			return 0, false
		}
		d = time.Duration(secs) * time.Second
	} else if v.Tag == "!!str" {
		var err error
		if d, err = time.ParseDuration(v.Value); err != nil {
			l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
			return 0, false
		}
	} else {
		l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
		return 0, false
	}
	if d <= 0 {
		l.errorf(v.Line, path, "must be more than zero, got %s", describeYAML(v))
		return 0, false
	}
	return d, true
}

func (l *loader) oneOf(path string, v *yaml.Node, allowed ...string) (string, bool) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
		for _, a := range allowed {
			if v.Value == a {
				return a, true
			}
		}
	}
	l.errorf(v.Line, path, "must be one of %s, got %s", strings.Join(allowed, ", "), describeYAML(v))
	return "", false
}

func (l *loader) nonEmptyString(path string, v *yaml.Node) (string, bool) {
	s, ok := l.scalarString(path, v)
	if ok && s == "" {
		l.errorf(v.Line, path, "must not be empty")
		return "", false
	}
	return s, ok
}

// user checks the form of nginx's "user name [group]": one or two names or numeric ids.
// Empty means not set. Whether they exist on this system is internal/confio's Check, for
// conf reads nothing but the config file.
func (l *loader) user(path string, v *yaml.Node) (string, bool) {
	s, ok := l.scalarString(path, v)
	if !ok {
		return "", false
	}
	fields := strings.Fields(s)
	if len(fields) > 2 {
		l.errorf(v.Line, path, `must be "user" or "user group", got %s`, describeYAML(v))
		return "", false
	}
	return strings.Join(fields, " "), true
}

// scalarString takes a scalar's text as written, so `key: 12345` is the string "12345".
func (l *loader) scalarString(path string, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode || isYAMLNull(v) || v.Tag == "!!bool" {
		l.errorf(v.Line, path, "must be a string, got %s", describeYAML(v))
		return "", false
	}
	return v.Value, true
}

// list returns a sequence's items; null (every item commented out) is the empty list.
func (l *loader) list(path string, v *yaml.Node) ([]*yaml.Node, bool) {
	if isYAMLNull(v) {
		return nil, true
	}
	if v.Kind != yaml.SequenceNode {
		l.errorf(v.Line, path, "must be a list, got %s", describeYAML(v))
		return nil, false
	}
	items := make([]*yaml.Node, len(v.Content))
	for i, item := range v.Content {
		items[i] = yamlDeref(item)
	}
	return items, true
}

// crossCheck applies the rules that span several keys, on the merged config. Each error
// points at the key this file set, so a default never takes the blame.
func (l *loader) crossCheck(c *Config) {
	l.crossCheckEdge(c)
	l.crossCheckTLS(c)
	l.crossCheckHTTP2(c)
	l.crossCheckDeployment(c)
	l.crossCheckPluginAttr(c)
	if c.Admin.Listen == "" || !c.Deployment.ServesAdmin() {
		return // already reported, or admin.* is not used (data_plane)
	}
	if j := listenCollision(c.Admin.Listen, c.NodeListen); j >= 0 {
		node := fmt.Sprintf("node_listen[%d]", j)
		if p := l.pick("admin.listen", node, "node_listen"); p == "admin.listen" {
			l.errorf(l.lines[p], p, "%q binds the same socket as %s %q; give the Admin API its own address", c.Admin.Listen, node, c.NodeListen[j])
		} else {
			l.errorf(l.lines[p], node, "%q binds the same socket as admin.listen %q; give the Admin API its own address", c.NodeListen[j], c.Admin.Listen)
		}
	}
	if c.Prometheus.Enabled && c.Prometheus.ExportAddr != "" {
		if c.Prometheus.ExportAddr == c.Admin.Listen {
			l.errorf(l.lines["prometheus.export_addr"], "prometheus.export_addr", "%q binds the same socket as admin.listen; give metrics their own address", c.Prometheus.ExportAddr)
		}
		if j := listenCollision(c.Prometheus.ExportAddr, c.NodeListen); j >= 0 {
			l.errorf(l.lines["prometheus.export_addr"], "prometheus.export_addr", "%q binds the same socket as node_listen[%d] %q; give metrics their own address", c.Prometheus.ExportAddr, j, c.NodeListen[j])
		}
	}
	if c.Status.Enabled && c.Status.Listen != "" {
		for _, other := range []struct{ name, addr string }{{"admin.listen", c.Admin.Listen}, {"prometheus.export_addr", c.Prometheus.ExportAddr}} {
			if other.addr == c.Status.Listen && (other.name != "prometheus.export_addr" || c.Prometheus.Enabled) {
				l.errorf(l.lines["status.listen"], "status.listen", "%q binds the same socket as %s; give the status API its own address", c.Status.Listen, other.name)
			}
		}
		if j := listenCollision(c.Status.Listen, c.NodeListen); j >= 0 {
			l.errorf(l.lines["status.listen"], "status.listen", "%q binds the same socket as node_listen[%d] %q; give the status API its own address", c.Status.Listen, j, c.NodeListen[j])
		}
	}
	loopback := isLoopbackListen(c.Admin.Listen)
	for i, k := range c.Admin.Keys {
		if k.Key != "" {
			continue
		}
		p := fmt.Sprintf("admin.keys[%d].key", i)
		if loopback {
			l.errorf(l.lines[p], p, "must not be empty: an empty key would admit every local client that sends no key; set a secret such as the output of `openssl rand -hex 16`")
		} else {
			l.errorf(l.lines[p], p, "must not be empty: admin.listen %q is not a loopback address, so an empty key would let anyone who reaches it reconfigure the gateway (CVE-2020-13945); set a secret such as the output of `openssl rand -hex 16`, or set admin.listen to 127.0.0.1:%s",
				c.Admin.Listen, listenPort(c.Admin.Listen))
		}
	}
	if loopback {
		return
	}
	// CVE-2020-13945: APISIX's published key opened the Admin API to anyone who could reach it.
	fix := fmt.Sprintf("or set admin.listen to 127.0.0.1:%s", listenPort(c.Admin.Listen))
	if len(c.Admin.Keys) == 0 && !l.keysFailed {
		p := l.pick("admin.listen", "admin.keys", "admin")
		l.errorf(l.lines[p], "admin.listen", "%q is not a loopback address and admin.keys is empty, so the built-in public key %s would let anyone who reaches that address reconfigure the gateway (CVE-2020-13945); add a secret key of your own under admin.keys, %s",
			c.Admin.Listen, DefaultAdminKey, fix)
	}
	for i, k := range c.Admin.Keys {
		if k.Key == DefaultAdminKey {
			p := fmt.Sprintf("admin.keys[%d].key", i)
			l.errorf(l.lines[l.pick(p, "admin.listen")], p, "is the built-in public key, refused because admin.listen %q is not a loopback address (CVE-2020-13945); replace it with a secret of your own (e.g. from `openssl rand -hex 16`), %s",
				c.Admin.Listen, fix)
		}
	}
}

// pick returns the first path set in this file, else the first path.
func (l *loader) pick(paths ...string) string {
	for _, p := range paths {
		if _, ok := l.lines[p]; ok {
			return p
		}
	}
	return paths[0]
}

// listenCollision returns the index of the first address in addrs that would bind the same
// socket as addr, or -1. A wildcard host takes the port on every address of its family
// only: gw listens on [::] with IPV6_V6ONLY, as nginx's "listen [::]:80" (ipv6only=on), so
// 0.0.0.0:80 and [::]:80 are two sockets that may both be listed.
func listenCollision(addr string, addrs []string) int {
	a, err := netip.ParseAddrPort(addr)
	if err != nil {
		return -1
	}
	for i, other := range addrs {
		b, err := netip.ParseAddrPort(other)
		if err != nil || a.Port() != b.Port() {
			continue
		}
		sameFamily := a.Addr().Is4() == b.Addr().Is4()
		if a.Addr() == b.Addr() || sameFamily && (a.Addr().IsUnspecified() || b.Addr().IsUnspecified()) {
			return i
		}
	}
	return -1
}

func isLoopbackListen(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().IsLoopback()
}

func listenPort(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// yamlInt returns a YAML integer's value (decimal, 0x, 0o as YAML allows).
func yamlInt(v *yaml.Node) (int64, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, false
	}
	var n int64
	if err := v.Decode(&n); err != nil {
		return 0, false
	}
	return n, true
}

func parseAllDigits(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// yamlDeref follows YAML aliases (*name) to the node they stand for.
func yamlDeref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isYAMLNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describeYAML renders a value for "got ..." in messages: strings quoted, other scalars as
// written, collections by kind.
func describeYAML(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isYAMLNull(n):
		return "nothing"
	case n.Tag == "!!str":
		return strconv.Quote(n.Value)
	default:
		return n.Value
	}
}

func findYAMLField(fields []yamlField, name string) (yamlField, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return yamlField{}, false
}

func yamlFieldNames(fields []yamlField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}
