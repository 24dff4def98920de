// Package realip is APISIX's real-ip plugin (priority 23000): per route, it names the
// client from a variable (source: http_x_forwarded_for, http_x_real_ip, arg_ip...) when
// the TCP peer is one of trusted_addresses, as nginx's realip module does server-wide
// (gw's real_ip_from in config.yaml). The address it names is the request's RemoteAddr
// from then on (plugins.Ctx.SetRemoteIP): $remote_addr and $remote_port to every later
// plugin (ip-restriction, limit-count's key), the X-Real-IP and X-Forwarded-For sent
// upstream, and the access log. A source without an address, or with a bad one, changes
// nothing.
package realip
