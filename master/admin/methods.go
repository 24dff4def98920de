package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gw/conf"
	"gw/master/store"
	"gw/plugins"
)

// request is one Admin API call after routing: /apisix/admin/<res>/<id>/<subPath>.
type request struct {
	res     *resource
	id      string
	subPath string
	query   url.Values
	body    any // decoded JSON: map[string]any, []any, string, json.Number, bool or nil
	ctx     context.Context
	// ifModified, when set (PATCH), makes the write a compare-and-swap on the object's
	// ModifiedIndex: on etcd another node may change it between the read and the write.
	ifModified uint64
}

// item is one object in APISIX v3's envelope; writes answer without the indexes.
type item struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	CreatedIndex  uint64          `json:"createdIndex,omitempty"`
	ModifiedIndex uint64          `json:"modifiedIndex,omitempty"`
	// LeftOut, gw's own, says why the workers do not serve this stored object (it failed
	// to decode or to build at start); absent for every object served.
	LeftOut string `json:"left_out,omitempty"`
}

type listBody struct {
	List  []item `json:"list"`
	Total int    `json:"total"`
}

func key(kind store.Kind, id string) string { return "/apisix/" + string(kind) + "/" + id }

func fullItem(obj store.Object) item {
	return item{Key: key(obj.Kind, obj.ID), Value: obj.Value, CreatedIndex: obj.CreatedIndex, ModifiedIndex: obj.ModifiedIndex}
}

type rejection struct {
	status int
	body   any
}

// readBody decodes the body as JSON whatever the Content-Type says (curl -d sends a form
// type). An empty body decodes to nil.
func readBody(r *http.Request) (any, *rejection) {
	tooBig := &rejection{http.StatusRequestEntityTooLarge,
		errorBody{ErrorMsg: fmt.Sprintf("request body too large: the Admin API accepts at most %d bytes (1.5 MiB, as APISIX)", maxBodyBytes)}}
	if r.ContentLength > maxBodyBytes {
		return nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: "invalid request body: " + err.Error()}}
	}
	if len(data) > maxBodyBytes {
		return nil, tooBig
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	body, err := decodeJSON(data)
	if err != nil {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: "invalid request body: " + err.Error(), ReqBody: string(data)}}
	}
	// On the raw body: decoding has already replaced invalid UTF-8 with U+FFFD, which
	// would be stored as if the client had sent it.
	if err := conf.CheckText(data); err != nil {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: err.Error()}}
	}
	return body, nil
}

// decodeJSON decodes one JSON value, keeping numbers as written so that large integers
// (limit-count's 2000000000000) survive the round trip unchanged.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("BUG: admin: encoding decoded JSON: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// leftOutReasons are the reasons of the objects the served snapshot leaves out, by key
// ("routes/1"); nil when none is.
func (h *Handler) leftOutReasons() map[string]string {
	if h.opts.Builder == nil {
		return nil
	}
	var reasons map[string]string
	for _, l := range h.opts.Builder.LeftOut() {
		if reasons == nil {
			reasons = map[string]string{}
		}
		reasons[l.Key()] = l.Reason
	}
	return reasons
}

func (h *Handler) withLeftOut(it item, reasons map[string]string) item {
	it.LeftOut = reasons[strings.TrimPrefix(it.Key, "/apisix/")]
	return it
}

func (h *Handler) get(req request) (int, any) {
	if req.subPath != "" {
		return subPathRefused(req)
	}
	if req.id != "" {
		obj, ok := h.opts.Store.Get(req.res.kind, req.id)
		if !ok {
			return http.StatusNotFound, notFound
		}
		return http.StatusOK, req.res.shownItem(h.withLeftOut(fullItem(obj), h.leftOutReasons()))
	}
	page, pageSize, paged, err := paging(req.query)
	if err != nil {
		return badRequest(err.Error())
	}
	filter, err := parseListFilter(req.query)
	if err != nil {
		return badRequest(err.Error())
	}
	objects := filterObjects(h.opts.Store.List(req.res.kind), filter)
	body := listBody{List: []item{}, Total: len(objects)}
	reasons := h.leftOutReasons()
	if paged {
		// page-1 is compared before it is multiplied: a page past every list (page=
		// 9223372036854775807) overflowed into a negative offset, and slicing panicked.
		start := len(objects)
		if page-1 <= len(objects)/pageSize {
			start = (page - 1) * pageSize
		}
		objects = objects[start:min(start+pageSize, len(objects))]
	}
	for _, obj := range objects {
		body.List = append(body.List, req.res.shownItem(h.withLeftOut(fullItem(obj), reasons)))
	}
	return http.StatusOK, body
}

// paging reads APISIX's page (from 1) and page_size (10..500); without either the whole
// list is returned.
func paging(query url.Values) (page, pageSize int, paged bool, err error) {
	page, pageSize = 1, 10
	if s := query.Get("page"); s != "" {
		if page, err = strconv.Atoi(s); err != nil || page < 1 {
			return 0, 0, false, errors.New("page must be an integer of 1 or more")
		}
		paged = true
	}
	if s := query.Get("page_size"); s != "" {
		if pageSize, err = strconv.Atoi(s); err != nil || pageSize < 10 || pageSize > 500 {
			return 0, 0, false, errors.New("page_size must be between 10 and 500")
		}
		paged = true
	}
	return page, pageSize, paged, nil
}

func subPathRefused(req request) (int, any) {
	return badRequest("a sub path (/" + req.subPath + ") is accepted only by PATCH")
}

// newObject checks what PUT and POST have in common: a JSON object without server-set
// properties.
func newObject(req request) (map[string]any, *rejection) {
	if req.body == nil {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: "missing configurations"}}
	}
	obj, ok := req.body.(map[string]any)
	if !ok {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: "invalid configuration: the body must be a JSON object"}}
	}
	if msg := forbiddenProperty(obj); msg != "" {
		return nil, &rejection{http.StatusBadRequest, errorBody{ErrorMsg: msg}}
	}
	return obj, nil
}

// forbiddenProperty refuses create_time and update_time from clients, at the top level
// and where APISIX also looks (the inline upstream and the plugins object).
func forbiddenProperty(obj map[string]any) string {
	for _, where := range []string{"", "upstream", "plugins"} {
		m := obj
		if where != "" {
			m, _ = obj[where].(map[string]any)
			where += "."
		}
		for _, name := range []string{"create_time", "update_time"} {
			if _, set := m[name]; set {
				return "the property is forbidden: " + where + name
			}
		}
	}
	return ""
}

func (h *Handler) put(req request) (int, any) {
	if req.subPath != "" {
		return subPathRefused(req)
	}
	obj, bad := newObject(req)
	if bad != nil {
		return bad.status, bad.body
	}
	id := req.id
	if req.res.idField != "" {
		return h.putByField(req, obj)
	}
	if req.res.validateNamed != nil {
		if id == "" {
			return badRequest(req.res.missingID)
		}
		return h.createOrReplace(req, id, obj) // the path names it; the value holds no id
	}
	rawID, hasBodyID := obj["id"]
	var bodyID string
	if hasBodyID {
		var err error
		if bodyID, err = parseBodyID(rawID); err != nil {
			return badRequest(err.Error())
		}
	}
	switch {
	case id == "" && !hasBodyID:
		return badRequest("missing " + req.res.singular + " id")
	case id == "":
		id = bodyID
	case hasBodyID && bodyID != id:
		return badRequest("wrong " + req.res.singular + " id")
	}

	// As APISIX's check_conf: the path's id, which is text, when the path has one, and
	// otherwise the body's as written, so {"id": 1} PUT to the collection is stored and
	// echoed as the integer 1. The store's key is the id's text either way.
	if req.id != "" || !hasBodyID {
		obj["id"] = id
	}
	return h.createOrReplace(req, id, obj)
}

// putByField is PUT for a kind whose id is a body field (a consumer's username): the id
// comes from the path or that field, which must agree, and no "id" is added.
func (h *Handler) putByField(req request, obj map[string]any) (int, any) {
	field := req.res.idField
	id := req.id
	bodyID, hasBodyID := obj[field].(string)
	switch {
	case id != "" && hasBodyID && bodyID != id:
		return badRequest("wrong " + field)
	case id == "" && !hasBodyID:
		// The validator says what is wrong with the field (missing, not a string).
		if status, body := check(h.opts.Store, req.res, id, obj); status != 0 {
			return status, body
		}
		return badRequest("missing " + req.res.singular + " " + field)
	case id == "":
		id = bodyID
	}

	return h.createOrReplace(req, id, obj)
}

// createOrReplace is the end of both PUTs: obj becomes id's object, keeping the replaced
// object's create_time, and the answer is 201 for a new object and 200 for a replaced one.
// It takes writeMu before it reads the stored object, so the create_time kept is that of
// the object the write replaces.
func (h *Handler) createOrReplace(req request, id string, obj map[string]any) (int, any) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	now := h.timestamp()
	obj["create_time"] = now
	if prev, ok := h.opts.Store.Get(req.res.kind, id); ok {
		if created := storedField(prev, "create_time"); created != nil {
			obj["create_time"] = created
		}
	}
	obj["update_time"] = now
	return h.write(req, id, obj, func(created bool) int {
		if created {
			return http.StatusCreated
		}
		return http.StatusOK
	})
}

// timestamp is now as the objects' create_time and update_time hold it: Unix seconds.
func (h *Handler) timestamp() json.Number {
	return json.Number(strconv.FormatInt(h.now().Unix(), 10))
}

func (h *Handler) post(req request) (int, any) {
	if req.subPath != "" {
		return subPathRefused(req)
	}
	obj, bad := newObject(req)
	if bad != nil {
		return bad.status, bad.body
	}
	if _, hasBodyID := obj["id"]; hasBodyID || req.id != "" {
		return badRequest("wrong " + req.res.singular + " id, do not need it")
	}

	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	now := h.timestamp()
	obj["create_time"] = now
	obj["update_time"] = now
	// Validate before NewID: a rejected POST must not consume a revision.
	if status, body := check(h.opts.Store, req.res, "", obj); status != 0 {
		return status, body
	}
	id, err := h.opts.Store.NewID()
	if err != nil {
		return http.StatusServiceUnavailable, errorBody{ErrorMsg: err.Error()}
	}
	obj["id"] = id
	return h.write(req, id, obj, func(bool) int { return http.StatusCreated })
}

func (h *Handler) patch(req request) (int, any) {
	if req.id == "" {
		return badRequest("missing " + req.res.singular + " id")
	}
	if req.body == nil {
		return badRequest("missing new configuration")
	}
	patchObj, isObject := req.body.(map[string]any)
	if req.subPath == "" && !isObject {
		return badRequest("invalid configuration")
	}

	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	prev, ok := h.opts.Store.Get(req.res.kind, req.id)
	if !ok {
		return http.StatusNotFound, notFound
	}
	stored, err := decodeJSON(prev.Value)
	if err != nil {
		panic(fmt.Sprintf("BUG: admin: stored %s/%s is not JSON: %v", prev.Kind, prev.ID, err))
	}
	obj := stored.(map[string]any)
	now := h.timestamp()
	if req.subPath != "" {
		if err := replaceAt(obj, req.subPath, req.body); err != nil {
			return badRequest(err.Error())
		}
		obj["update_time"] = now
	} else {
		obj = mergePatch(obj, patchObj).(map[string]any)
		// APISIX lets a PATCH set update_time; otherwise it is the time of the change.
		if patchObj["update_time"] == nil {
			obj["update_time"] = now
		}
	}
	if _, kept := obj["create_time"]; !kept {
		if created := storedField(prev, "create_time"); created != nil {
			obj["create_time"] = created
		}
	}
	if rawID, has := obj["id"]; has {
		bodyID, err := parseBodyID(rawID)
		if err != nil {
			return badRequest(err.Error())
		}
		if bodyID != req.id {
			return badRequest("wrong " + req.res.singular + " id")
		}
	}
	obj["id"] = req.id
	req.ifModified = prev.ModifiedIndex
	return h.write(req, req.id, obj, func(bool) int { return http.StatusOK })
}

func (h *Handler) delete(req request) (int, any) {
	if req.subPath != "" {
		return subPathRefused(req)
	}
	if req.id == "" && req.res.validateNamed != nil {
		return badRequest("missing metadata key") // APISIX's words for plugin_metadata
	}
	if req.id == "" {
		return badRequest("missing " + req.res.singular + " id")
	}
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if _, ok := h.opts.Store.Get(req.res.kind, req.id); !ok {
		return http.StatusNotFound, notFound
	}
	if req.query.Get("force") != "true" {
		if msg := h.stillUsed(req.res, req.id); msg != "" {
			return badRequest(msg)
		}
	}
	// With force=true what used the object stays, answering 503 where it needs it.
	snap, code, body := h.prepare(store.Change{Kind: req.res.kind, ID: req.id})
	if code != 0 {
		return code, body
	}
	deleted, err := h.opts.Store.Delete(req.res.kind, req.id)
	if err != nil {
		return http.StatusServiceUnavailable, errorBody{ErrorMsg: err.Error()}
	}
	if !deleted {
		panic("BUG: admin: object vanished under the write lock")
	}
	if err := h.publish(req.ctx, snap); err != nil {
		return notServed(err)
	}
	return http.StatusOK, struct {
		Deleted string `json:"deleted"`
		Key     string `json:"key"`
	}{"1", key(req.res.kind, req.id)}
}

// write validates obj as a whole, stores it and publishes the result. Callers hold
// writeMu from their first read of the store, so what was validated is what is stored.
func (h *Handler) write(req request, id string, obj map[string]any, status func(created bool) int) (int, any) {
	if code, body := check(h.opts.Store, req.res, id, obj); code != 0 {
		return code, body
	}
	if err := checkAcrossObjects(h.opts.Store, req.res.kind, id, encodeJSON(obj)); err != nil {
		return badRequest(err.Error())
	}
	snap, code, body := h.prepare(store.Change{Kind: req.res.kind, ID: id, Value: encodeJSON(obj)})
	if code != 0 {
		return code, body
	}
	var stored store.Object
	var created bool
	var err error
	if req.ifModified != 0 {
		stored, err = h.opts.Store.PutIf(req.res.kind, id, encodeJSON(obj), req.ifModified)
	} else {
		stored, created, err = h.opts.Store.Put(req.res.kind, id, encodeJSON(obj))
	}
	if errors.Is(err, store.ErrInvalidID) {
		return badRequest("invalid configuration: property \"id\" validation failed: " + err.Error())
	}
	if err != nil {
		return http.StatusServiceUnavailable, errorBody{ErrorMsg: err.Error()}
	}
	if err := h.publish(req.ctx, snap); err != nil {
		return notServed(err)
	}
	return status(created), req.res.shownItem(item{Key: key(stored.Kind, stored.ID), Value: stored.Value})
}

// check validates obj, to be stored as id, with the resource's validator, then the
// objects it references in s. It returns status 0 when obj may be stored.
func check(s *store.Store, res *resource, id string, obj map[string]any) (int, any) {
	value := encodeJSON(obj)
	validate := res.validate
	if res.validateNamed != nil {
		validate = func(value []byte) error { return res.validateNamed(id, value) }
	}
	if err := validate(value); err != nil {
		return badRequest(err.Error())
	}
	if res.conflicts != nil {
		if err := res.conflicts(s, value); err != nil {
			return badRequest(err.Error())
		}
	}
	for _, ref := range res.refs {
		id := idString(fieldAt(obj, ref.field))
		if id == "" {
			continue
		}
		if _, ok := s.Get(ref.kind, id); !ok {
			word := resourceOf(ref.kind).singular
			return badRequest(fmt.Sprintf("failed to fetch %s info by %s id [%s], response code: 404", word, word, id))
		}
	}
	return 0, nil
}

// stillUsed names the first object whose reference field points at res/id, or "".
func (h *Handler) stillUsed(res *resource, id string) string {
	if res.kind == "upstreams" {
		if msg := h.upstreamInPlugins(res, id); msg != "" {
			return msg
		}
	}
	for _, name := range referrerOrder {
		referrer := resources[name]
		for _, ref := range referrer.refs {
			if ref.kind != res.kind {
				continue
			}
			for _, obj := range h.opts.Store.List(referrer.kind) {
				if idString(storedField(obj, ref.field)) == id {
					return fmt.Sprintf("%s, %s [%s] is still using it now", res.inUse, referrer.singular, obj.ID)
				}
			}
		}
	}
	return ""
}

// upstreamInPlugins names the first object whose plugins name the upstream id
// (traffic-split's upstream_id, plugins.UpstreamReferrer), in APISIX's order and words
// (apisix/admin/upstreams.lua, delete_checker), or "".
func (h *Handler) upstreamInPlugins(res *resource, id string) string {
	for _, kind := range []struct {
		kind store.Kind
		word string
	}{
		{"routes", "route"}, {"services", "service"}, {"plugin_configs", "plugin_config"},
		{"consumers", "consumer"}, {"global_rules", "global_rules"},
	} {
		for _, obj := range h.opts.Store.List(kind.kind) {
			var stored struct {
				Plugins map[string]json.RawMessage `json:"plugins"`
			}
			if json.Unmarshal(obj.Value, &stored) != nil {
				continue
			}
			for _, named := range plugins.UpstreamIDsOf(stored.Plugins) {
				if string(named) == id {
					return fmt.Sprintf("%s, plugin in %s [%s] is still using it now", res.inUse, kind.word, obj.ID)
				}
			}
		}
	}
	return ""
}

// storedField returns the field of a stored object at path (see reference), decoded, or
// nil.
func storedField(obj store.Object, path string) any {
	v, err := decodeJSON(obj.Value)
	if err != nil {
		return nil
	}
	return fieldAt(v, path)
}

// fieldAt walks a decoded JSON value down path, a dot between levels; nil when a level is
// missing or not an object.
func fieldAt(v any, path string) any {
	for name := range strings.SplitSeq(path, ".") {
		fields, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = fields[name]
	}
	return v
}

func notServed(err error) (int, any) {
	return http.StatusServiceUnavailable, errorBody{ErrorMsg: "stored, but not yet served by every worker: " + err.Error()}
}

// checkAcrossObjects runs the plugins' cross-object rules (limit-count's group) for the
// write of value as kind/id, against s as it is before the write. It costs a snapshot of
// s, so it runs only when the object configures a plugin that has such a rule.
func checkAcrossObjects(s *store.Store, kind store.Kind, id string, value []byte) error {
	var obj struct {
		Plugins map[string]json.RawMessage `json:"plugins"`
	}
	// Only the kinds with plugins have the field; validate has refused a bad one.
	if json.Unmarshal(value, &obj) != nil || !plugins.ChecksSnapshot(obj.Plugins) {
		return nil
	}
	return plugins.CheckWrite(obj.Plugins, s.Snapshot(), string(kind)+"/"+id)
}
