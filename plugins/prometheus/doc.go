// Package prometheus is APISIX's prometheus plugin (priority 500): on a route it records
// the request's status, latency and bandwidth for the metrics export. For now it holds the
// schema only: Parse decodes a route's configuration strictly ({} and {"prefer_name":
// true} are the usual ones), and the package registers that check with the plugin
// registry so the Admin API refuses bad configurations. Recording and the export land with
// their own issue.
package prometheus
