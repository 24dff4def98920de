package vars

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
)

// bodyRequest is a POST of body with contentType, read as gw's server reads it: the
// header, then the body as a stream (StreamRequestBody), chunked when chunked is set.
func bodyRequest(tb testing.TB, contentType, body string, chunked bool) *fasthttp.RequestCtx {
	tb.Helper()
	var raw strings.Builder
	raw.WriteString("POST /chat HTTP/1.1\r\nHost: example.com\r\n")
	if contentType != "" {
		raw.WriteString("Content-Type: " + contentType + "\r\n")
	}
	if chunked {
		raw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 7) // small chunks: the reading must join them
			raw.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n" + rest[:n] + "\r\n")
			rest = rest[n:]
		}
		raw.WriteString("0\r\n\r\n")
	} else {
		raw.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init2(testConn{local: tcpAddr(tb, "10.0.0.1:9080"), remote: tcpAddr(tb, "192.0.2.7:50000")}, quietLogger{}, true)
	br := bufio.NewReader(strings.NewReader(raw.String()))
	if err := ctx.Request.Header.Read(br); err != nil {
		tb.Fatal(err)
	}
	if err := ctx.Request.ContinueReadBodyStream(br, 1<<20, false); err != nil {
		tb.Fatal(err)
	}
	return ctx
}

// chatBody is an OpenAI-style request, APISIX's t/admin/routes_request_body.t's bodies
// and t/core/ctx3.t's fields together.
const chatBody = `{"model":"gpt-4","stream":true,"temperature":0.7,"n":null,"esc":"a\"b\u00e9",` +
	`"messages":[{"role":"system","content":"You are a mathematician"},` +
	`{"role":"user","content":[{"text":"x","type":"text"},{"text":"y","type":"image_url"}]}],` +
	`"tags":["a","b",3],"obj":{"k":1, "l":[true]},"a.b":"dotted","model2":{"name":"deepseek"}}`

const formBody = `model=openai&messages%5B0%5D%5Brole%5D=system&msg=You%20are+here&dup=1&dup=2&flag&&k%65y=v`

const multipartBody = "preamble\r\n--testboundary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai\r\n" +
	"--testboundary\r\ncontent-disposition: form-data; name=file; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nline1\r\nline2\r\n" +
	"--testboundary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsecond\r\n--testboundary--\r\n"

func TestPostArgValue(t *testing.T) {
	const (
		json      = "application/json"
		form      = "application/x-www-form-urlencoded"
		multipart = "multipart/form-data; boundary=testboundary"
	)
	none := "\x00none"
	tests := []struct {
		contentType, body, name, want string
	}{
		// t/core/ctx3.t TEST 4: several fields of one JSON body.
		{json, chatBody, "post_arg.model", "gpt-4"},
		{json, chatBody, "post_arg.stream", "true"},
		{json, chatBody, "post_arg.temperature", "0.7"},
		{json, chatBody, "post_arg.n", none}, // null: no value
		{json, chatBody, "post_arg.esc", "a\"b\u00e9"},
		{json, chatBody, "post_arg.messages[0].role", "system"},
		{json, chatBody, "post_arg.messages[-1].role", "user"},
		{json, chatBody, "post_arg.messages[*].role", "system"}, // the first match
		{json, chatBody, "post_arg.messages[2].role", none},
		{json, chatBody, "post_arg.messages.0.role", none}, // a name is no index, as in APISIX
		{json, chatBody, "post_arg.obj", `{"k":1,"l":[true]}`},
		{json, chatBody, "post_arg.obj.l[0]", "true"},
		{json, chatBody, "post_arg.obj.*", "1"},
		{json, chatBody, "post_arg.tags[2]", "3"},
		{json, chatBody, "post_arg.['a.b']", "dotted"},
		{json, chatBody, `post_arg.x["a.b"]`, none},
		{json, `{"x":{"a.b":"dotted"}}`, `post_arg.x["a.b"]`, "dotted"},
		{json, chatBody, "post_arg.model2.name", "deepseek"}, // routes_request_body.t TEST 11-12
		{json, chatBody, "post_arg.model.name", none},        // a string has no fields
		{json, chatBody, "post_arg.missing", none},
		{json, chatBody, "post_arg_model", none}, // post_arg_ reads urlencoded forms alone
		{json + "; charset=utf-8", chatBody, "post_arg.model", "gpt-4"},
		{json, `{"model":`, "post_arg.model", none}, // does not parse
		{json, ``, "post_arg.model", none},
		// routes_request_body.t TEST 4; t/core/ctx2.t TEST 12-13.
		{form, formBody, "post_arg.model", "openai"},
		{form, formBody, "post_arg_model", "openai"},
		{form + ";charset=utf-8", formBody, "post_arg_model", "openai"},
		{form, formBody, "post_arg_messages[0][role]", "system"},
		{form, formBody, "post_arg.msg", "You are here"},
		{form, formBody, "post_arg.key", "v"},
		{form, formBody, "post_arg.dup", "1"},
		{form, formBody, "post_arg.dup[1]", "2"},
		{form, formBody, "post_arg.dup[-1]", "2"},
		{form, formBody, "post_arg.dup[2]", none},
		{form, formBody, "post_arg.flag", ""},
		{form, formBody, "post_arg.model.name", none},
		{form, formBody, "post_arg_missing", none},
		// routes_request_body.t TEST 5.
		{multipart, multipartBody, "post_arg.model", "openai"},
		{multipart, multipartBody, "post_arg.model[1]", "second"},
		{multipart, multipartBody, "post_arg.file", "line1\r\nline2"},
		{multipart, multipartBody, "post_arg_model", none},
		{"multipart/form-data", multipartBody, "post_arg.model", none}, // no boundary
		// routes_request_body.t TEST 6: no Content-Type, nothing is read.
		{"", chatBody, "post_arg.model", none},
		{"text/plain", formBody, "post_arg.model", none},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			ctx := bodyRequest(t, tt.contentType, tt.body, chunked)
			v := mustVar(t, tt.name)
			got, ok := Value(&Request{HTTP: ctx}, &v, nil)
			if !ok {
				got = []byte(none)
			}
			if string(got) != tt.want {
				t.Errorf("%s of %q (%s, chunked %v) = %q, want %q", tt.name, tt.body, tt.contentType, chunked, got, tt.want)
			}
			// Read once, kept: the request's body is what was sent, byte for byte.
			if body := ctx.Request.Body(); string(body) != tt.body {
				t.Errorf("%s of %q: the request's body is now %q", tt.name, tt.body, body)
			}
			ctx.ResetUserValues()
		}
	}
}

func TestPostArgContains(t *testing.T) {
	tests := []struct {
		contentType, body, name, want string
		has                           bool
	}{
		// t/admin/routes_request_body.t TEST 7-9.
		{"application/json", chatBody, "post_arg.messages[*].content[*].type", "image_url", true},
		{"application/json", `{"messages":[{"content":[{"type":"text"}]}]}`, "post_arg.messages[*].content[*].type", "image_url", false},
		{"application/json", chatBody, "post_arg.messages[*].role", "user", true},
		{"application/json", chatBody, "post_arg.tags", "b", true}, // an array's items
		{"application/json", chatBody, "post_arg.tags", "3", true},
		{"application/json", chatBody, "post_arg.tags", "c", false},
		{"application/json", chatBody, "post_arg.model", "gpt-4", true},
		{"application/json", chatBody, "post_arg.obj.*", "1", true},
		{"application/x-www-form-urlencoded", formBody, "post_arg.dup", "2", true},
		{"application/x-www-form-urlencoded", formBody, "post_arg_dup", "2", true},
		{"application/x-www-form-urlencoded", formBody, "post_arg.msg", "You are here", true},
		{"application/x-www-form-urlencoded", formBody, "post_arg.dup", "3", false},
		{"multipart/form-data; boundary=testboundary", multipartBody, "post_arg.model", "second", true},
	}
	for _, tt := range tests {
		ctx := bodyRequest(t, tt.contentType, tt.body, false)
		v := mustVar(t, tt.name)
		if got := Contains(&Request{HTTP: ctx}, &v, tt.want); got != tt.has {
			t.Errorf("Contains(%s, %q) of %q = %v, want %v", tt.name, tt.want, tt.body, got, tt.has)
		}
	}
}

// A body past maxBodyRead is not parsed, and still goes on whole: the bytes read, then
// the rest of the stream.
func TestPostArgBodyTooLarge(t *testing.T) {
	defer func(saved int) { maxBodyRead = saved }(maxBodyRead)
	maxBodyRead = 10
	for _, chunked := range []bool{false, true} {
		ctx := bodyRequest(t, "application/json", chatBody, chunked)
		v := mustVar(t, "post_arg.model")
		if got, ok := Value(&Request{HTTP: ctx}, &v, nil); ok {
			t.Errorf("chunked %v: post_arg.model of a body past maxBodyRead = %q, want none", chunked, got)
		}
		sent, err := io.ReadAll(ctx.Request.BodyStream())
		if err != nil || string(sent) != chatBody {
			t.Errorf("chunked %v: the body streams on as %q, %v; want it whole", chunked, sent, err)
		}
	}
}

// A stream that breaks leaves the request's stream broken the same way, for the proxy
// to fail on and the edge to answer.
func TestPostArgBrokenBody(t *testing.T) {
	broken := errors.New("client went away")
	ctx := bodyRequest(t, "application/json", `{}`, false)
	ctx.Request.SetBodyStream(io.MultiReader(strings.NewReader(`{"model":"gpt`), errReader{broken}), 100)
	v := mustVar(t, "post_arg.model")
	if got, ok := Value(&Request{HTTP: ctx}, &v, nil); ok {
		t.Errorf("post_arg.model of a broken body = %q, want none", got)
	}
	if _, err := ctx.Request.BodyStream().Read(make([]byte, 10)); err != broken {
		t.Errorf("the request's stream reads %v, want %v", err, broken)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Reading a body variable, parse included, allocates nothing once the pools are warm:
// each round is a new request on the same RequestCtx, as on a kept-alive connection.
func TestPostArgAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	for _, tt := range []struct{ contentType, body, name string }{
		{"application/json", chatBody, "post_arg.messages[*].content[*].type"},
		{"application/json", chatBody, "post_arg.model"},
		{"application/x-www-form-urlencoded", formBody, "post_arg_msg"},
		{"multipart/form-data; boundary=testboundary", multipartBody, "post_arg.file"},
	} {
		ctx := bodyRequest(t, tt.contentType, tt.body, false)
		v := mustVar(t, tt.name)
		var stream bytes.Reader
		body := []byte(tt.body)
		allocs := testing.AllocsPerRun(100, func() {
			ctx.ResetUserValues()
			stream.Reset(body)
			ctx.Request.SetBodyStream(&stream, len(tt.body))
			var scratch [64]byte
			r := Request{HTTP: ctx}
			if _, ok := Value(&r, &v, scratch[:0]); !ok {
				t.Fatalf("%s has no value", tt.name)
			}
			Contains(&r, &v, "image_url")
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", tt.name, allocs)
		}
	}
}

func BenchmarkPostArg(b *testing.B) {
	for _, tt := range []struct{ bench, contentType, body, name string }{
		{"json", "application/json", chatBody, "post_arg.model"},
		{"json-wildcard", "application/json", chatBody, "post_arg.messages[*].content[*].type"},
		{"form", "application/x-www-form-urlencoded", formBody, "post_arg_msg"},
		{"multipart", "multipart/form-data; boundary=testboundary", multipartBody, "post_arg.file"},
	} {
		b.Run(tt.bench, func(b *testing.B) {
			ctx := bodyRequest(b, tt.contentType, tt.body, false)
			v := mustVar(b, tt.name)
			var stream bytes.Reader
			body := []byte(tt.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				ctx.ResetUserValues()
				stream.Reset(body)
				ctx.Request.SetBodyStream(&stream, len(body))
				var scratch [64]byte
				Value(&Request{HTTP: ctx}, &v, scratch[:0])
			}
		})
	}
}
