package admin

import (
	"errors"
	"strings"
)

// mergePatch applies patch to target as a JSON merge patch (RFC 7386): objects merge
// key by key, recursively; null deletes a key; anything else, arrays included, replaces.
// target may be modified in place; use the result.
func mergePatch(target, patch any) any {
	patchObj, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	targetObj, ok := target.(map[string]any)
	if !ok {
		targetObj = map[string]any{}
	}
	for name, value := range patchObj {
		if value == nil {
			delete(targetObj, name)
			continue
		}
		targetObj[name] = mergePatch(targetObj[name], value)
	}
	return targetObj
}

// replaceAt sets the attribute at path ("upstream/nodes") of obj to value, creating
// missing intermediate objects as APISIX does. Walking through a value that is not an
// object is an error naming the path up to it.
func replaceAt(obj map[string]any, path string, value any) error {
	names := strings.Split(path, "/")
	for i, name := range names[:len(names)-1] {
		if name == "" {
			return errors.New("invalid sub-path: /" + path)
		}
		next, exists := obj[name]
		if !exists || next == nil {
			child := map[string]any{}
			obj[name] = child
			obj = child
			continue
		}
		child, ok := next.(map[string]any)
		if !ok {
			return errors.New("invalid sub-path: /" + strings.Join(names[:i+1], "/"))
		}
		obj = child
	}
	last := names[len(names)-1]
	if last == "" {
		return errors.New("invalid sub-path: /" + path)
	}
	obj[last] = value
	return nil
}
