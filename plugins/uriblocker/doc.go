// Package uriblocker is APISIX's uri-blocker plugin (priority 2900): a route refuses the
// requests whose URI one of its block_rules matches, with rejected_code (403) and, given
// rejected_msg, {"error_msg": ...}. The rules are Go RE2 regular expressions, joined into
// one with '|' as APISIX joins them ("(?i)" first when case_insensitive), compiled once
// per snapshot. The URI is APISIX's request_uri: the normalised, decoded path and the
// query as sent, so a path written around a rule ("/./internal") is still caught.
package uriblocker
