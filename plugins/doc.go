// Package plugins holds the plugin contract and the registry. Each plugin lives in a
// sub-package that registers itself in init(); importing plugins/all links every plugin
// in. The master uses the registry to validate Admin API writes; workers build each
// route's chain from it once per config snapshot, never per request.
package plugins
