// Package redirect is APISIX's redirect plugin (priority 900): a route answers ret_code
// (302) with a Location instead of proxying. uri is the Location with variables
// expanded; regex_uri substitutes the first match in the decoded path (no match, no
// redirect); http_to_https sends a request that is not https to https on the same host
// and target, 301 for GET and HEAD and 308 for the rest. encode_uri percent-encodes the
// path as nginx does and append_query_string adds the client's query. Templates and the
// regex compile once per snapshot; a request writes the Location into pooled buffers.
package redirect
