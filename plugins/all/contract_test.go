package all

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

const module = "gw"

// sourceFile is one parsed Go file of the module.
type sourceFile struct {
	path string // slash-separated, from the module root
	file *ast.File
}

func (f sourceFile) dir() string { return filepath.ToSlash(filepath.Dir(f.path)) }

func (f sourceFile) imports() []string {
	var paths []string
	for _, imp := range f.file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		paths = append(paths, p)
	}
	return paths
}

// moduleFiles parses every Go file of the module, tests included, so that the rules hold
// for what tests link in as well.
func moduleFiles(t *testing.T) []sourceFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	fset := token.NewFileSet()
	var files []sourceFile
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, sourceFile{filepath.ToSlash(rel), f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// linked is the set of plugin packages this package links in, from all.go.
func linked(t *testing.T, files []sourceFile) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, f := range files {
		if f.path == "plugins/all/all.go" {
			for _, p := range f.imports() {
				set[strings.TrimPrefix(p, module+"/")] = true
			}
		}
	}
	if len(set) == 0 {
		t.Fatal("plugins/all/all.go links no plugin")
	}
	return set
}

// registers reports whether f calls plugins.Register.
func registers(f *ast.File) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Register" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "plugins" {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// hostLibraries are the packages under plugins/ that hold no plugin and that the host
// may import: plugins/vars is the one variable language, which the router's vars, the
// chash balancer and every plugin read alike (issue 18).
var hostLibraries = map[string]bool{"plugins/vars": true}

// The host knows the contract, never a plugin: outside plugins/, the only plugin
// packages imported are plugins (the contract) and plugins/all (every plugin, for its
// registration), and the host libraries. The contract itself imports no plugin.
func TestTheHostImportsNoParticularPlugin(t *testing.T) {
	for _, f := range moduleFiles(t) {
		inPlugins := strings.HasPrefix(f.path, "plugins/")
		for _, p := range f.imports() {
			if !strings.HasPrefix(p, module+"/plugins/") {
				continue
			}
			switch {
			case !inPlugins && p != module+"/plugins/all" && !hostLibraries[strings.TrimPrefix(p, module+"/")]:
				t.Errorf("%s imports %s: outside plugins/, import gw/plugins (the contract) or gw/plugins/all, "+
					"and reach what the plugin offers through an optional interface on it (plugins/doc.go)", f.path, p)
			case f.dir() == "plugins" && !hostLibraries[strings.TrimPrefix(p, module+"/")]:
				// The contract may read variables (Ctx.VarsRequest, Ctx.ExpandTemplate), as plugins/vars's
				// doc.go allows: vars imports no plugin and not the contract.
				t.Errorf("%s imports %s: the contract must not know its plugins", f.path, p)
			}
		}
	}
}

// Adding a plugin is one folder and one line in all.go: every folder that registers a
// plugin is linked here and has the same layout, and no plugin imports another (what
// they share lives in a helper package, which registers nothing).
func TestEveryPluginFolderLooksTheSame(t *testing.T) {
	files := moduleFiles(t)
	plugged := linked(t, files)
	byDir := map[string][]sourceFile{}
	for _, f := range files {
		if strings.HasPrefix(f.path, "plugins/") && strings.Count(f.path, "/") == 2 {
			byDir[f.dir()] = append(byDir[f.dir()], f)
		}
	}
	for dir := range plugged {
		if byDir[dir] == nil {
			t.Errorf("all.go links %s, which has no Go files", dir)
		}
	}
	for dir, list := range byDir {
		if dir == "plugins/all" {
			continue
		}
		isPlugin := slices.ContainsFunc(list, func(f sourceFile) bool {
			return !strings.HasSuffix(f.path, "_test.go") && registers(f.file)
		})
		if isPlugin != plugged[dir] {
			t.Errorf("%s: registers a plugin %v, linked in all.go %v: a plugin folder is linked, a helper registers nothing", dir, isPlugin, plugged[dir])
		}
		if !isPlugin {
			continue
		}
		for _, want := range []string{"config.go", "handler.go", "doc.go", "README.md"} {
			if _, err := os.Stat(filepath.Join("../..", dir, want)); err != nil {
				t.Errorf("%s has no %s: every plugin folder has config.go, handler.go, doc.go, README.md and tests", dir, want)
			}
		}
		if !slices.ContainsFunc(list, func(f sourceFile) bool { return strings.HasSuffix(f.path, "_test.go") }) {
			t.Errorf("%s has no tests", dir)
		}
		for _, f := range list {
			for _, p := range f.imports() {
				if other := strings.TrimPrefix(p, module+"/"); other != dir && plugged[other] {
					t.Errorf("%s imports the plugin %s: plugins share through helper packages (authn, pluginconf)", f.path, p)
				}
			}
		}
	}
}

// seamLeft lists the plugin files that still reach the HTTP/1.1 exchange under the Ctx
// (Ctx.Request, fasthttp) instead of the Ctx's methods, and why. The list may only
// shrink: anything new here would not run unchanged on an HTTP/2 stream.
var seamLeft = map[string]string{
	"plugins/limitcount/keys.go":       "limit-count's key variables, which the variable language (conf/vars.go) takes over",
	"plugins/proxyrewrite/template.go": "proxy-rewrite's template variables, likewise",
	"plugins/vars/vars.go":             "the variable language reads the HTTP/1.1 exchange; an HTTP/2 stream will be its second source",
	"plugins/vars/query.go":            "its query-string reader, likewise",
	"plugins/vars/body.go":             "its request-body reader (post_arg), likewise",
}

// outboundClients are the files that import fasthttp for its client alone, to call other
// servers (forward-auth's auth service, proxy-mirror's mirror): they build requests of
// their own and never read the exchange, which the Ctx.Request check below still holds
// them to. The loggers' and opentelemetry's are the batch senders, off the request path.
var outboundClients = map[string]bool{
	"plugins/forwardauth/client.go":   true,
	"plugins/proxymirror/client.go":   true,
	"plugins/httplogger/sender.go":    true,
	"plugins/opentelemetry/export.go": true,
}

// Plugins see a request through plugins.Ctx's methods only, so that a plugin written once
// runs on HTTP/1.1 and HTTP/2 alike (plugins/doc.go): no fasthttp import, no
// Ctx.Request, outside tests and the files seamLeft names.
func TestPluginsSeeRequestsThroughTheCtx(t *testing.T) {
	reached := map[string]bool{}
	for _, f := range moduleFiles(t) {
		if !strings.HasPrefix(f.path, "plugins/") || f.dir() == "plugins" || strings.HasSuffix(f.path, "_test.go") {
			continue
		}
		why := ""
		if slices.Contains(f.imports(), "github.com/valyala/fasthttp") && !outboundClients[f.path] {
			why = "imports fasthttp"
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Request" && ctxParam(f.file, sel) {
				why = "reads Ctx.Request"
			}
			return why == ""
		})
		if why == "" {
			continue
		}
		reached[f.path] = true
		if _, ok := seamLeft[f.path]; !ok {
			t.Errorf("%s %s: use the Ctx's methods (plugins/ctx.go); add one there if none fits", f.path, why)
		}
	}
	for path := range seamLeft {
		if !reached[path] {
			t.Errorf("%s no longer reaches the exchange: strike it from seamLeft", path)
		}
	}
}

// ctxParam reports whether sel reads a field of a *plugins.Ctx parameter of the function
// around it (the only way plugins get one).
func ctxParam(f *ast.File, sel *ast.SelectorExpr) bool {
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil || sel.Pos() < fn.Body.Pos() || sel.End() > fn.Body.End() {
			continue
		}
		for _, field := range fn.Type.Params.List {
			star, ok := field.Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if t, ok := star.X.(*ast.SelectorExpr); ok && t.Sel.Name == "Ctx" {
				for _, name := range field.Names {
					if name.Name == x.Name {
						return true
					}
				}
			}
		}
	}
	return false
}

// Every linked plugin builds an instance that runs in a phase from a configuration its
// own Validate accepts, in a worker with every segment: a plugin whose instance runs in no
// phase fails here, and its build fails at request-serving time only never.
func TestEveryPluginBuildsAPhase(t *testing.T) {
	cfg := conf.Default()
	shared := &plugins.Shared{Segments: map[string]*shm.Segment{}, Config: cfg, Logf: t.Logf}
	for name, spec := range plugins.Segments() {
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				t.Fatal(err)
			}
		}
		shared.Segments[name] = seg
	}
	// The least each plugin needs; {} for the rest.
	minimal := map[string]string{"limit-count": `{"count": 1, "time_window": 1}`, "proxy-rewrite": `{"uri": "/"}`}
	// plugins-a
	minimal["ip-restriction"] = `{"whitelist": ["127.0.0.1"]}`
	minimal["uri-blocker"] = `{"block_rules": ["^/internal/"]}`
	minimal["consumer-restriction"] = `{"whitelist": ["jack"]}`
	minimal["fault-injection"] = `{"abort": {"http_status": 503}}`
	minimal["real-ip"] = `{"source": "http_x_forwarded_for"}`
	minimal["redirect"] = `{"http_to_https": true}`
	// plugins-b
	minimal["limit-req"] = `{"rate": 1, "burst": 0, "key": "remote_addr"}`
	minimal["limit-conn"] = `{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`
	minimal["api-breaker"] = `{"break_response_code": 502}`
	// plugins-d
	minimal["forward-auth"] = `{"uri": "http://127.0.0.1:1/auth"}`
	minimal["proxy-mirror"] = `{"host": "http://127.0.0.1:1"}`
	// loggers
	minimal["http-logger"] = `{"uri": "http://127.0.0.1:1/log"}`
	minimal["tcp-logger"] = `{"host": "127.0.0.1", "port": 1}`
	minimal["udp-logger"] = `{"host": "127.0.0.1", "port": 1}`
	minimal["file-logger"] = `{"path": "logs/file.log"}`
	minimal["syslog"] = `{"host": "127.0.0.1", "port": 1}`
	build := plugins.NewSnapshotBuild(&conf.Snapshot{}, shared)
	for _, name := range plugins.Names() {
		raw := json.RawMessage(`{}`)
		if m, ok := minimal[name]; ok {
			raw = json.RawMessage(m)
		}
		p, _ := plugins.Lookup(name)
		if err := p.Validate(raw); err != nil {
			t.Errorf("%s: Validate(%s): %v", name, raw, err)
			continue
		}
		instance, err := plugins.BuildInstance(name, raw, build.Env(&plugins.RouteInfo{ID: "1"}, ""))
		if err != nil || instance == nil {
			t.Errorf("%s: BuildInstance(%s) = %v, %v; want an instance", name, raw, instance, err)
		}
	}
}
