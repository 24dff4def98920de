package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gw/conf"
	"gw/master/store"
)

// A backup (gwctl export, gwctl import) is one JSON object:
//
//	{"gw_backup": 1, "revision": 42,
//	 "upstreams": [{"id":"1","nodes":{...},"create_time":...,"update_time":...}],
//	 "routes":    [...], ...}
//
// one array per kind, holding each object's value exactly as the Admin API shows it, in
// creation order. "revision" says what the store had reached and is not restored.

// BackupFormat is the value of "gw_backup" this build writes and reads.
const BackupFormat = 1

const (
	formatField   = "gw_backup"
	revisionField = "revision"
	// maxReported bounds how many problems one refused import lists.
	maxReported = 20
)

// EncodeBackup lays out objects (from Store.All or store.ReadDir) as a backup, kinds in
// the order an import writes them.
func EncodeBackup(objects []store.Object, revision uint64) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "{%q:%d,%q:%d", formatField, BackupFormat, revisionField, revision)
	for _, kind := range importOrder() {
		fmt.Fprintf(&buf, ",%q:[", kind)
		first := true
		for _, obj := range objects {
			if obj.Kind != kind {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if res := resourceFor(kind); res != nil && res.validateNamed != nil {
				// The value holds no id (plugin_metadata): the backup names it, as "id",
				// which the import takes out again.
				value := bytes.TrimSpace(obj.Value)
				fmt.Fprintf(&buf, "{%q:%q", "id", obj.ID)
				if rest := bytes.TrimSpace(value[1:]); len(rest) > 0 && rest[0] != '}' {
					buf.WriteByte(',')
				}
				buf.Write(value[1:])
				continue
			}
			buf.Write(obj.Value)
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		panic("BUG: admin: a stored value is not JSON: " + err.Error())
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// Export returns the whole store as a backup, taken at one consistent point.
func (h *Handler) Export() []byte {
	return EncodeBackup(h.opts.Store.All())
}

// importOrder lists the kinds so that every kind comes after the kinds it references:
// a crash part-way through an import then leaves no dangling reference.
func importOrder() []store.Kind {
	var order []store.Kind
	placed := map[store.Kind]bool{}
	pending := store.Kinds()
	for len(pending) > 0 {
		progress := false
		for i := 0; i < len(pending); i++ {
			kind := pending[i]
			ready := true
			if res := resourceFor(kind); res != nil {
				for _, ref := range res.refs {
					ready = ready && (placed[ref.kind] || ref.kind == kind)
				}
			}
			if ready {
				order, placed[kind] = append(order, kind), true
				pending = slices.Delete(pending, i, i+1)
				i--
				progress = true
			}
		}
		if !progress {
			panic(fmt.Sprintf("BUG: admin: references between kinds form a cycle: %v", pending))
		}
	}
	return order
}

// resourceFor is the resource of kind, or nil for a kind the Admin API does not serve.
func resourceFor(kind store.Kind) *resource {
	for _, res := range resources {
		if res.kind == kind {
			return res
		}
	}
	return nil
}

// ImportError lists everything wrong with a backup. An import that returns one changed
// nothing.
type ImportError struct {
	Problems []string
	// Omitted counts the problems found beyond the first maxReported.
	Omitted int
}

// Error puts one problem on a line, indented under the verdict, as `gwctl test` does.
func (e *ImportError) Error() string {
	if len(e.Problems) == 1 && e.Omitted == 0 {
		return "import refused, nothing was changed: " + e.Problems[0]
	}
	msg := fmt.Sprintf("import refused, nothing was changed; %d problems:\n  %s", len(e.Problems)+e.Omitted, strings.Join(e.Problems, "\n  "))
	if e.Omitted > 0 {
		msg += fmt.Sprintf("\n  and %d more", e.Omitted)
	}
	return msg
}

func (e *ImportError) add(format string, args ...any) {
	if len(e.Problems) == maxReported {
		e.Omitted++
		return
	}
	e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
}

// imported is one object of a backup on its way into the store.
type imported struct {
	res   *resource
	where string // "routes[2] (id \"7\")", for messages
	id    string
	obj   map[string]any
}

// Import stores every object of a backup, replacing objects with the same id and leaving
// the others alone. It validates the whole result first, exactly as the Admin API would
// each object (references included, also to objects in the same backup), and changes
// nothing if anything is wrong; the error is an *ImportError naming each object, field
// and value at fault. Then it stores everything as one change and publishes it once, so
// a nil error means every live worker serves the imported objects. who names the caller
// in the audit log.
func (h *Handler) Import(ctx context.Context, data []byte, who, peer string) (summary string, err error) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	items, err := h.decodeBackup(data)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "nothing to import", nil
	}
	if err := h.validateImport(items); err != nil {
		return "", err
	}
	objects := make([]store.Object, len(items))
	changes := make([]store.Change, len(items))
	for i, it := range items {
		objects[i] = store.Object{Kind: it.res.kind, ID: it.id, Value: encodeJSON(it.obj)}
		changes[i] = store.Change{Kind: it.res.kind, ID: it.id, Value: objects[i].Value}
	}
	// The last word: what workers would be sent must build.
	snap, code, body := h.prepare(changes...)
	if code != 0 {
		return "", &ImportError{Problems: []string{messageOf(body)}}
	}
	if _, err := h.opts.Store.PutAll(objects); err != nil {
		return "", fmt.Errorf("import failed, nothing was changed: %w", err)
	}
	for _, obj := range objects {
		h.audit(auditRecord{Key: who, Peer: peer, Method: "IMPORT", Resource: Prefix + "/" + string(obj.Kind) + "/" + obj.ID, Status: 200})
	}
	counts := map[store.Kind]int{}
	for _, obj := range objects {
		counts[obj.Kind]++
	}
	var parts []string
	for _, kind := range importOrder() {
		if counts[kind] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[kind], kind))
		}
	}
	summary = "imported " + strings.Join(parts, ", ")
	if err := h.publish(ctx, snap); err != nil {
		return "", fmt.Errorf("%s and stored them, but not every worker serves them yet: %w", summary, err)
	}
	return summary, nil
}

// decodeBackup checks the layout of a backup and returns its objects in import order,
// each with its id and server-set times. Problems with single objects are all gathered.
func (h *Handler) decodeBackup(data []byte) ([]imported, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil || dec.More() {
		if err == nil {
			err = errors.New("data after the top-level object")
		}
		return nil, &ImportError{Problems: []string{"not a gw backup (a JSON object made by gwctl export): " + err.Error()}}
	}
	// As readBody does for one object: decoding has already replaced invalid text.
	if err := conf.CheckText(data); err != nil {
		return nil, &ImportError{Problems: []string{err.Error()}}
	}
	problems := &ImportError{}
	var format int
	if err := json.Unmarshal(top[formatField], &format); err != nil || format != BackupFormat {
		problems.add("%q: must be %d (a backup made by gwctl export), got %s", formatField, BackupFormat, orMissing(top[formatField]))
	}
	var names []string
	for name := range top {
		if name != formatField && name != revisionField && !slices.Contains(store.Kinds(), store.Kind(name)) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		problems.add("%q: unknown kind; a backup holds %v", name, importOrder())
	}
	now := json.Number(strconv.FormatInt(h.now().Unix(), 10))
	var items []imported
	firstSeen := map[store.Kind]map[string]string{}
	for _, kind := range importOrder() {
		raw, ok := top[string(kind)]
		if !ok {
			continue
		}
		res := resourceFor(kind)
		var values []json.RawMessage
		if err := json.Unmarshal(raw, &values); err != nil {
			problems.add("%q: must be an array of objects: %v", kind, err)
			continue
		}
		if res == nil {
			if len(values) > 0 {
				problems.add("%q: the Admin API of this build does not serve this kind, so it cannot import it", kind)
			}
			continue
		}
		firstSeen[kind] = map[string]string{}
		for i, value := range values {
			where := fmt.Sprintf("%s[%d]", kind, i)
			it, msg := h.decodeImported(res, where, value, now)
			if msg != "" {
				problems.add("%s", msg)
				continue
			}
			if earlier, dup := firstSeen[kind][it.id]; dup {
				problems.add("%s: id %q is also used by %s", it.where, it.id, earlier)
				continue
			}
			firstSeen[kind][it.id] = it.where
			items = append(items, it)
		}
	}
	if len(problems.Problems) > 0 {
		return nil, problems
	}
	return items, nil
}

func (h *Handler) decodeImported(res *resource, where string, value json.RawMessage, now json.Number) (imported, string) {
	decoded, err := decodeJSON(value)
	obj, isObject := decoded.(map[string]any)
	if err != nil || !isObject {
		return imported{}, fmt.Sprintf("%s: must be a JSON object, got %s", where, truncateValue(value))
	}
	idField := "id"
	if res.idField != "" {
		idField = res.idField
	}
	id := idString(obj[idField])
	if id == "" {
		return imported{}, fmt.Sprintf("%s: %q: must be a string or an integer, got %s", where, idField, orMissing(encodeValue(obj[idField])))
	}
	if !store.ValidID(id) {
		return imported{}, fmt.Sprintf("%s: %q: must be 1 to 64 characters of a-z A-Z 0-9 - _ ., got %q", where, idField, id)
	}
	if number, ok := obj[idField].(json.Number); ok {
		if _, err := conf.ParseJSONID(json.RawMessage(number)); err != nil {
			return imported{}, fmt.Sprintf("%s: %q: a number must be a positive integer written in digits, got %s", where, idField, number)
		}
	}
	if res.validateNamed != nil {
		delete(obj, "id") // EncodeBackup's: the stored value holds none
	}
	// An integer id stays an integer, as a PUT to the collection stores it: an export of
	// such an object imports back as it was.
	for _, field := range []string{"create_time", "update_time"} {
		if _, set := obj[field]; !set {
			obj[field] = now
		}
	}
	return imported{res: res, where: fmt.Sprintf("%s (id %q)", where, id), id: id, obj: obj}, ""
}

// validateImport applies every object to a scratch copy of the store, then checks each
// one there as the Admin API checks a write: the result must be a store the Admin API
// could have built.
func (h *Handler) validateImport(items []imported) error {
	scratch, err := h.opts.Store.Scratch()
	if err != nil {
		return fmt.Errorf("import failed, nothing was changed: %w", err)
	}
	objects := make([]store.Object, len(items))
	for i, it := range items {
		objects[i] = store.Object{Kind: it.res.kind, ID: it.id, Value: encodeJSON(it.obj)}
	}
	if _, err := scratch.PutAll(objects); err != nil {
		return &ImportError{Problems: []string{err.Error()}}
	}
	problems := &ImportError{}
	for _, it := range items {
		if status, body := check(scratch, it.res, it.id, it.obj); status != 0 {
			problems.add("%s: %s", it.where, messageOf(body))
			continue
		}
		if err := checkAcrossObjects(scratch, it.res.kind, it.id, encodeJSON(it.obj)); err != nil {
			problems.add("%s: %v", it.where, err)
		}
	}
	if len(problems.Problems) > 0 {
		return problems
	}
	return nil
}

func messageOf(body any) string {
	if e, ok := body.(errorBody); ok {
		return e.ErrorMsg
	}
	return fmt.Sprint(body)
}

func encodeValue(v any) []byte {
	if v == nil {
		return nil
	}
	return encodeJSON(v)
}

func orMissing(raw []byte) string {
	if len(raw) == 0 {
		return "nothing (missing)"
	}
	return truncateValue(raw)
}

func truncateValue(raw []byte) string {
	const limit = 60
	if len(raw) > limit {
		return string(raw[:limit]) + "..."
	}
	return string(raw)
}
