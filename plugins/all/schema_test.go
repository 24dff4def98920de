package all

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gw/internal/schemacheck"
	"gw/plugins"
)

// pluginDir is the folder of a plugin's package: its name without '-'.
func pluginDir(name string) string { return filepath.Join("..", strings.ReplaceAll(name, "-", "")) }

// Every plugin publishes a schema (GET /apisix/admin/plugins/{name}), an auth plugin a
// consumer schema too, each a schema that schemacheck reads in full.
func TestEveryPluginDescribesItsConfiguration(t *testing.T) {
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		d, ok := p.(plugins.Described)
		if !ok {
			t.Errorf("%s: no Schema (plugins.Described)", name)
			continue
		}
		checkSchemaShape(t, name, d.Schema())
		_, auth := p.(plugins.ConsumerAuth)
		cd, described := p.(plugins.ConsumerDescribed)
		switch {
		case auth && !described:
			t.Errorf("%s: an auth plugin without ConsumerSchema", name)
		case !auth && described:
			t.Errorf("%s: a ConsumerSchema on a plugin no consumer holds as a credential", name)
		case described:
			checkSchemaShape(t, name+" (consumer)", cd.ConsumerSchema())
		}
	}
}

func checkSchemaShape(t *testing.T, name string, schema []byte) {
	t.Helper()
	var top struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(schema, &top); err != nil || top.Type != "object" || top.Properties == nil {
		t.Errorf("%s: schema is not an object schema with properties (%v): %s", name, err, schema)
	}
	if err := schemacheck.Lint(schema); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// A schema says what the decoder accepts: every configuration a plugin's own tests write
// (each JSON object in its _test.go files, and each plugin configuration inside them),
// Validate and the schema judge alike wherever the schema refuses, and every one Validate
// accepts, the schema accepts. The tests hold accepted and refused cases alike, so both
// directions are exercised; Validate may refuse more (a regex RE2 cannot compile, an
// unknown variable).
func TestSchemasAgreeWithValidate(t *testing.T) {
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		corpus := testConfigurations(t, name)
		judge(t, name, p.(plugins.Described).Schema(), p.Validate, corpus)
		if auth, ok := p.(plugins.ConsumerAuth); ok {
			judge(t, name+" (consumer)", p.(plugins.ConsumerDescribed).ConsumerSchema(), auth.ValidateConsumer, corpus)
		}
	}
}

func judge(t *testing.T, name string, schema []byte, validate func(json.RawMessage) error, corpus []json.RawMessage) {
	t.Helper()
	var accepted, refusedBySchema int
	for _, raw := range corpus {
		validateErr := validate(raw)
		schemaErr := schemacheck.Check(schema, raw)
		if validateErr == nil {
			accepted++
			if schemaErr != nil {
				t.Errorf("%s: Validate accepts %s, the schema refuses it: %v", name, raw, schemaErr)
			}
		}
		if schemaErr != nil {
			refusedBySchema++
		}
	}
	t.Logf("%s: %d configs, %d accepted, %d refused by schema", name, len(corpus), accepted, refusedBySchema)
	if accepted == 0 || refusedBySchema == 0 {
		t.Errorf("%s: of %d configurations in the tests, Validate accepts %d and the schema refuses %d; want some of each",
			name, len(corpus), accepted, refusedBySchema)
	}
}

var backquoted = regexp.MustCompile("`[^`]*`")

// testConfigurations are the JSON objects written in the plugin's _test.go files, and
// the plugin's configuration in each that is an object with plugins.
func testConfigurations(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(pluginDir(name), "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no tests in %s (%v)", name, pluginDir(name), err)
	}
	var corpus []json.RawMessage
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, lit := range backquoted.FindAll(src, -1) {
			corpus = append(corpus, configurationsIn(name, lit[1:len(lit)-1])...)
		}
	}
	return corpus
}

// configurationsIn reads text as JSON objects, one after another, and returns each and
// the configuration of the plugin named name in each one's "plugins"; nothing when
// text is not JSON objects.
func configurationsIn(name string, text []byte) []json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(text))
	var found []json.RawMessage
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return found
		}
		if err != nil || len(raw) == 0 || raw[0] != '{' {
			return nil
		}
		var obj struct {
			Plugins map[string]json.RawMessage `json:"plugins"`
		}
		if json.Unmarshal(raw, &obj) == nil && obj.Plugins[name] != nil {
			found = append(found, obj.Plugins[name])
		} else {
			found = append(found, raw)
		}
	}
}

var (
	fence    = regexp.MustCompile("(?s)```(json|sh)\n(.*?)```")
	curlData = regexp.MustCompile(`(?s)-d '([^']*)'`)
)

// Each plugin configuration in a plugin's README examples (a ```json block, or the body
// of a curl -d in a ```sh block) is accepted by Validate (or ValidateConsumer, on a
// consumer) and by the schema; a curl to the plugin's /plugin_metadata/ by
// ValidateMetadata and the metadata schema.
func TestREADMEExamplesMatchTheSchema(t *testing.T) {
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		readme, err := os.ReadFile(filepath.Join(pluginDir(name), "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		examples := 0
		for _, block := range fence.FindAllSubmatch(readme, -1) {
			texts, metadata := [][]byte{block[2]}, []bool{false}
			if string(block[1]) == "sh" {
				texts, metadata = nil, nil
				from := 0
				for _, d := range curlData.FindAllSubmatchIndex(block[2], -1) {
					texts = append(texts, block[2][d[2]:d[3]])
					// A curl to /plugin_metadata/<name> writes the plugin's metadata.
					metadata = append(metadata, bytes.Contains(block[2][from:d[0]], []byte("/plugin_metadata/"+name)))
					from = d[1]
				}
			}
			for i, text := range texts {
				if metadata[i] {
					md, ok := p.(plugins.MetadataOwner)
					if !ok {
						t.Errorf("%s README: a plugin_metadata example, but %s has no metadata", name, name)
						continue
					}
					examples++
					if err := md.ValidateMetadata(text); err != nil {
						t.Errorf("%s README: ValidateMetadata refuses %s: %v", name, text, err)
					}
					if err := schemacheck.Check(md.MetadataSchema(), text); err != nil {
						t.Errorf("%s README: the metadata schema refuses %s: %v", name, text, err)
					}
					continue
				}
				for _, ex := range readmeExamples(name, text) {
					examples++
					schema, validate := p.(plugins.Described).Schema(), p.Validate
					// A consumer's configuration of a plugin that is no credential is
					// a route's (consumer-restriction on a consumer).
					if _, auth := p.(plugins.ConsumerAuth); ex.consumer && auth {
						schema, validate = p.(plugins.ConsumerDescribed).ConsumerSchema(), p.(plugins.ConsumerAuth).ValidateConsumer
					}
					if err := validate(ex.raw); err != nil {
						t.Errorf("%s README: Validate refuses %s: %v", name, ex.raw, err)
					}
					if err := schemacheck.Check(schema, ex.raw); err != nil {
						t.Errorf("%s README: the schema refuses %s: %v", name, ex.raw, err)
					}
				}
			}
		}
		t.Logf("%s README: %d examples", name, examples)
		if examples == 0 {
			t.Errorf("%s README: no example configuration found", name)
		}
	}
}

type example struct {
	raw      json.RawMessage
	consumer bool
}

// readmeExamples are the plugin's configurations in text, JSON objects one after
// another: an object with "plugins" gives its configuration of the plugin (a consumer's
// when the object has a username), an object of the plugin's own fields is one itself.
// Text that is not JSON (a shell loop splicing a variable in) gives nothing.
func readmeExamples(name string, text []byte) []example {
	dec := json.NewDecoder(bytes.NewReader(text))
	var found []example
	for {
		var obj map[string]json.RawMessage
		err := dec.Decode(&obj)
		if err == io.EOF {
			return found
		}
		if err != nil {
			return nil
		}
		if set, ok := obj["plugins"]; ok {
			var byName map[string]json.RawMessage
			if json.Unmarshal(set, &byName) == nil && byName[name] != nil {
				_, consumer := obj["username"]
				found = append(found, example{byName[name], consumer})
			}
			continue
		}
		if _, route := obj["uri"]; !route {
			raw, _ := json.Marshal(obj)
			found = append(found, example{raw: raw})
		}
	}
}
