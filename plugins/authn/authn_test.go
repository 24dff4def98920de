package authn

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

func snapshot() *conf.Snapshot {
	return &conf.Snapshot{Consumers: []conf.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{"p": json.RawMessage(`{"k":"1"}`)}},
		{Username: "guest"},
		{Username: "jill", Plugins: map[string]json.RawMessage{"p": json.RawMessage(`{"k":"2"}`), "q": json.RawMessage(`{}`)}},
	}}
}

func TestUsernames(t *testing.T) {
	if got := Usernames(nil); len(got) != 0 {
		t.Errorf("Usernames(nil) = %v", got)
	}
	got := Usernames(snapshot())
	if len(got) != 3 || !got["jack"] || !got["guest"] || !got["jill"] {
		t.Errorf("Usernames = %v, want jack, guest, jill", got)
	}
}

func TestCredentials(t *testing.T) {
	tests := []struct {
		name   string
		snap   *conf.Snapshot
		plugin string
		stopAt int // stop after this many; 0 walks them all
		want   string
	}{
		{"in snapshot order, skipping consumers without the plugin", snapshot(), "p", 0, `jack={"k":"1"} jill={"k":"2"}`},
		{"another plugin", snapshot(), "q", 0, `jill={}`},
		{"a plugin nobody configures", snapshot(), "r", 0, ``},
		{"nil snapshot", nil, "p", 0, ``},
		{"stopping early", snapshot(), "p", 1, `jack={"k":"1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			for username, raw := range Credentials(tt.snap, tt.plugin) {
				seen = append(seen, username+"="+string(raw))
				if len(seen) == tt.stopAt {
					break
				}
			}
			if got := strings.Join(seen, " "); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReject(t *testing.T) {
	consumers := map[string]bool{"jack": true, "guest": true}
	body := []byte(`{"message":"Missing"}` + "\n")
	tests := []struct {
		name, anonymous string
		wantAnswered    bool
		wantConsumer    string
		wantBody        string
	}{
		{"no anonymous consumer", "", true, "", string(body)},
		{"anonymous consumer", "guest", false, "guest", ""},
		{"anonymous consumer that does not exist", "ghost", true, "", string(InvalidUserBody)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRejection(`Basic realm="shop"`, tt.anonymous, consumers)
			ctx := &fasthttp.RequestCtx{}
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
			defer plugins.ReleaseCtx(c)
			answered := r.Reject(c, body)
			c.ApplyResponseHeaders() // as the worker does once the response is final
			if answered != tt.wantAnswered || answered != c.Answered() || c.Consumer != tt.wantConsumer {
				t.Fatalf("Reject = %v (Answered %v), consumer %q; want %v, %q", answered, c.Answered(), c.Consumer, tt.wantAnswered, tt.wantConsumer)
			}
			resp := &ctx.Response
			if !answered {
				if resp.StatusCode() != 200 || len(resp.Body()) != 0 || resp.Header.Peek("WWW-Authenticate") != nil {
					t.Errorf("let through with a response written: %d %q", resp.StatusCode(), resp.Body())
				}
				return
			}
			if resp.StatusCode() != 401 || string(resp.Body()) != tt.wantBody {
				t.Errorf("answer %d %q, want 401 %q", resp.StatusCode(), resp.Body(), tt.wantBody)
			}
			if got := string(resp.Header.Peek("WWW-Authenticate")); got != `Basic realm="shop"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			if got := string(resp.Header.ContentType()); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
		})
	}
}

func TestRealm(t *testing.T) {
	long := strings.Repeat("r", 129)
	tests := []struct{ value, want, wantErr string }{
		{`"basic"`, "basic", ""},
		{`"my realm!"`, "my realm!", ""},
		{`" ~"`, " ~", ""},
		{`"` + long[:128] + `"`, long[:128], ""},
		{`"` + long + `"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "` + long[:39] + `...`},
		{`""`, "", "realm: must not be empty"},
		{`1`, "", "realm: must be a string, got 1"},
		{`"a\"b"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "a\"b"`},
		{`"a\\b"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "a\\b"`},
		{`"a\tb"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "a\tb"`},
		{`"\u00e9"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "\u00e9"`},
		{`"\u007f"`, "", `realm: must be 1-128 printable ASCII characters without '"' or '\', got "\u007f"`},
	}
	for _, tt := range tests {
		members, err := pluginconf.Verbatim.Members(json.RawMessage(`{"realm": ` + tt.value + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Realm(members[0])
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("Realm(%s) = %q, %v; want %q", tt.value, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("Realm(%s) = %q, %v; want error %q", tt.value, got, err, tt.wantErr)
		}
	}
}
