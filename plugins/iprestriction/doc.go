// Package iprestriction is APISIX's ip-restriction plugin (priority 3000): a route lets
// through only the clients its whitelist covers, or refuses those its blacklist covers,
// answering 403 (or 404) with {"message": ...}. The lists are IPv4 and IPv6 addresses and
// CIDRs, parsed once into netip prefixes; a request compares the client's address, the
// one RemoteAddr gives (real_ip_from and the real-ip plugin apply first), against them
// without allocating.
package iprestriction
