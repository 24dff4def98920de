package conf

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEnvAccepts covers APISIX's rules for ${{NAME}} and ${{NAME:=default}} (resolve_conf_var
// in apisix/cli/file.lua), each case checked against the value the loader ends up with.
func TestEnvAccepts(t *testing.T) {
	t.Setenv("GW_T_KEY", "s3cret")
	t.Setenv("GW_T_PORT", "9180")
	t.Setenv("GW_T_EMPTY", "")
	t.Setenv("GW_T_TWO", "2")
	t.Setenv("GW_T_FALSE", "false")
	t.Setenv("GW_T_REF", "${{GW_T_KEY}}") // a value is not scanned again
	tests := []struct {
		name  string
		yaml  string
		check func(c *Config) any
		want  any
	}{
		{"whole value", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: '${{GW_T_KEY}}'}]\n",
			func(c *Config) any { return c.Admin.Keys[0].Key }, "s3cret"},
		{"plain scalar", "admin:\n  listen: 0.0.0.0:9180\n  keys:\n    - name: ops\n      key: ${{GW_T_KEY}}\n",
			func(c *Config) any { return c.Admin.Keys[0].Key }, "s3cret"},
		{"inside a value", "admin: {listen: '127.0.0.1:${{GW_T_PORT}}'}",
			func(c *Config) any { return c.Admin.Listen }, "127.0.0.1:9180"},
		{"two in one value", "data_dir: '${{GW_T_KEY}}/${{GW_T_PORT}}'",
			func(c *Config) any { return c.DataDir }, "s3cret/9180"},
		{"spaces inside the braces", "data_dir: '${{ GW_T_KEY }}'",
			func(c *Config) any { return c.DataDir }, "s3cret"},
		{"default when unset", "data_dir: ${{GW_T_UNSET:=/var/lib/gw}}",
			func(c *Config) any { return c.DataDir }, "/var/lib/gw"},
		{"default trimmed", "data_dir: '${{GW_T_UNSET := /srv }}'",
			func(c *Config) any { return c.DataDir }, "/srv"},
		{"set variable beats the default", "data_dir: ${{GW_T_KEY:=other}}",
			func(c *Config) any { return c.DataDir }, "s3cret"},
		{"empty variable is used, not the default", "data_dir: 'x${{GW_T_EMPTY:=y}}'",
			func(c *Config) any { return c.DataDir }, "x"},
		{"number becomes an integer", "worker_processes: ${{GW_T_TWO}}",
			func(c *Config) any { return c.WorkerProcesses }, 2},
		{"quoted number becomes an integer too", `worker_processes: "${{GW_T_TWO}}"`,
			func(c *Config) any { return c.WorkerProcesses }, 2},
		{"default number", "worker_processes: ${{GW_T_UNSET:=3}}",
			func(c *Config) any { return c.WorkerProcesses }, 3},
		{"default word", "worker_processes: ${{GW_T_UNSET:=auto}}",
			func(c *Config) any { return c.WorkerProcesses }, 0},
		{"false becomes a boolean", "access_log: {enabled: '${{GW_T_FALSE}}'}",
			func(c *Config) any { return c.AccessLog.Enabled }, false},
		{"default seconds", "worker_shutdown_timeout: ${{GW_T_UNSET:=30}}",
			func(c *Config) any { return c.WorkerShutdownTimeout }, 30 * time.Second},
		{"list item", "node_listen: ['${{GW_T_UNSET:=9081}}', 9082]",
			func(c *Config) any { return c.NodeListen }, []string{"0.0.0.0:9081", "0.0.0.0:9082"}},
		{"a value holding ${{ is used as it is", "data_dir: ${{GW_T_REF}}",
			func(c *Config) any { return c.DataDir }, "${{GW_T_KEY}}"},
		{"a key", "${{GW_T_UNSET:=data_dir}}: d",
			func(c *Config) any { return c.DataDir }, "d"},
		{"a comment is not read", "# ${{GW_T_UNSET}}\ndata_dir: d",
			func(c *Config) any { return c.DataDir }, "d"},
		{"an alias is substituted once", "data_dir: &d ${{GW_T_REF}}\nuser: *d",
			func(c *Config) any { return c.User }, "${{GW_T_KEY}}"},
		{"nginx's ${var} is left alone", "data_dir: '${var}/$x'",
			func(c *Config) any { return c.DataDir }, "${var}/$x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "f.yaml")
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.yaml, err)
			}
			if got := tt.check(c); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) gives %#v, want %#v", tt.yaml, got, tt.want)
			}
		})
	}
}

func TestEnvRejects(t *testing.T) {
	t.Setenv("GW_T_TRUE", "true")
	t.Setenv("GW_T_EMPTY", "")
	tests := []struct {
		name, yaml, want string // want: the whole message after "f.yaml:"
	}{
		{"unset without default", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: '${{GW_ADMIN_KEY_T}}'}]\n",
			"3: admin.keys[0].key: environment variable GW_ADMIN_KEY_T is not set (referenced as ${{GW_ADMIN_KEY_T}}); set it, or give a default with ${{GW_ADMIN_KEY_T:=value}}"},
		{"unset in a key", "${{GW_T_UNSET}}: 1",
			"1: environment variable GW_T_UNSET is not set (referenced as ${{GW_T_UNSET}}); set it, or give a default with ${{GW_T_UNSET:=value}}"},
		{"no closing braces", "data_dir: '${{GW_T_UNSET'",
			`1: data_dir: "${{GW_T_UNSET" opens an environment variable with ${{ but has no closing }}; write ${{NAME}} or ${{NAME:=default}}`},
		{"bad name", "data_dir: '${{GW-T}}'",
			"1: data_dir: ${{GW-T}} is not an environment variable reference; write ${{NAME}} or ${{NAME:=default}}, NAME being letters, digits and _ and not starting with a digit"},
		{"empty name", "data_dir: '${{:=x}}'",
			"1: data_dir: ${{:=x}} is not an environment variable reference; write ${{NAME}} or ${{NAME:=default}}, NAME being letters, digits and _ and not starting with a digit"},
		{"nested default", "data_dir: '${{A:=${{B}}}}'",
			"1: data_dir: ${{A:=${{B}}: a default cannot hold another ${{...}} reference"},
		{"text joins into a reference", "data_dir: '$${{A:=}}{{B}}'",
			"1: data_dir: the text around its ${{...}} references joins into a new ${{; rewrite the value"},
		{"substituted value still checked", "access_log: {enabled: '${{GW_T_UNSET:=yes please}}'}",
			`1: access_log.enabled: must be true or false, got "yes please"`},
		{"boolean where a string belongs", "data_dir: ${{GW_T_TRUE}}",
			"1: data_dir: must be a string, got true"},
		{"empty admin key off loopback", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: '${{GW_T_EMPTY}}'}]\n",
			"3: admin.keys[0].key: must not be empty: admin.listen \"0.0.0.0:9180\" is not a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("Parse(%q) accepted it", tt.yaml)
			}
			if got := strings.TrimPrefix(err.Error(), "f.yaml:"); !strings.HasPrefix(got, tt.want) {
				t.Fatalf("Parse(%q):\n got %s\nwant %s", tt.yaml, got, tt.want)
			}
		})
	}
}
