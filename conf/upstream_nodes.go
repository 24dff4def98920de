package conf

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Node is one upstream server. The map form {"host:port": weight} and the array form
// [{host, port, weight, priority}] decode to the same slice.
type Node struct {
	Host     string         `json:"host"`
	Port     int            `json:"port,omitempty"`
	Weight   int            `json:"weight"` // 0 to MaxNodeWeight
	Priority int            `json:"priority,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Nodes is an upstream's node list in a stable order.
type Nodes []Node

// MarshalJSON writes an IPv6 host in brackets again, the form decoding requires of it, so
// that a decoded node (whose host has none) encodes to JSON that decodes back to it.
func (n Node) MarshalJSON() ([]byte, error) {
	type plain Node // plain has the fields and tags but not this method
	p := plain(n)
	if strings.IndexByte(p.Host, ':') >= 0 && !strings.HasPrefix(p.Host, "[") {
		p.Host = "[" + p.Host + "]"
	}
	return json.Marshal(p)
}

// UnmarshalJSON accepts APISIX's two node forms. The map form {"host:port": weight} is
// sorted by key, since JSON objects have no order and the balancer needs a stable one; the
// port may be left out (0: the scheme's default) and an IPv6 host needs brackets. The
// array form [{host, port, weight, priority, metadata}] keeps its order; host and weight
// are required. Hosts must be IP addresses or DNS names; a name need not resolve yet. A
// JSON null leaves n unchanged, as encoding/json expects.
func (n *Nodes) UnmarshalJSON(data []byte) error {
	if jsonKind(data) == "null" {
		return nil
	}
	nodes, err := parseNodes("nodes", data)
	if err != nil {
		return err
	}
	*n = nodes
	return nil
}

// parseNodes returns a non-nil slice for an empty "nodes", so that "given but empty" (as
// APISIX allows) stays apart from "missing". Errors are *ObjectError under path.
func parseNodes(path string, raw json.RawMessage) (Nodes, error) {
	switch jsonKind(raw) {
	case "object":
		return parseNodeMap(path, raw)
	case "array":
		return parseNodeList(path, raw)
	}
	return nil, at(path, wrongType("object or array", raw))
}

func parseNodeMap(path string, raw json.RawMessage) (Nodes, error) {
	weights, err := asObject(raw)
	if err != nil {
		return nil, at(path, err)
	}
	nodes := make(Nodes, 0, len(weights))
	for _, addr := range slices.Sorted(maps.Keys(weights)) {
		host, port, err := splitNodeAddr(addr)
		if err != nil {
			return nil, at(path, fmt.Errorf("node %q: %w", addr, err))
		}
		weight, err := readWeight(weights[addr])
		if err != nil {
			return nil, at(path, fmt.Errorf("node %q: weight %w", addr, err))
		}
		nodes = append(nodes, Node{Host: host, Port: port, Weight: weight})
	}
	return nodes, nil
}

func parseNodeList(path string, raw json.RawMessage) (Nodes, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, at(path, err)
	}
	nodes := make(Nodes, len(items))
	for i, item := range items {
		itemPath := path + "[" + strconv.Itoa(i) + "]"
		members, err := nodeFields.decode(&nodes[i], itemPath, item)
		if err == nil {
			err = require(members, itemPath, "host", "weight")
		}
		if err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

var nodeFields = fieldDecoders[Node]{
	"host":     into(func(n *Node) *string { return &n.Host }, readNodeHost),
	"port":     into(func(n *Node) *int { return &n.Port }, readPort),
	"weight":   into(func(n *Node) *int { return &n.Weight }, readWeight),
	"priority": into(func(n *Node) *int { return &n.Priority }, asInt),
	"metadata": into(func(n *Node) *map[string]any { return &n.Metadata }, readMetadata),
}

// readNodeHost keeps an IPv6 address without its brackets, the form net.JoinHostPort wants.
// As in APISIX (upstream.lua check_schema), the client must write it in brackets.
func readNodeHost(raw json.RawMessage) (string, error) {
	host, err := checkedString(raw, func(host string) error {
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
			return fmt.Errorf("%s, got %q", errIPv6Brackets, host)
		}
		return checkNodeHost(host)
	})
	return trimBrackets(host), err
}

// errIPv6Brackets is APISIX's refusal of a node host that is an IPv6 address without
// brackets (t/admin/upstream.t TEST 23).
const errIPv6Brackets = "IPv6 address must be enclosed with '[' and ']'"

func readPort(raw json.RawMessage) (int, error) {
	port, err := asInt(raw)
	if err == nil && (port < 1 || port > maxPort) {
		err = fmt.Errorf("must be 1-%d, got %d", maxPort, port)
	}
	return port, err
}

func readMetadata(raw json.RawMessage) (map[string]any, error) {
	if jsonKind(raw) != "object" {
		return nil, wrongType("object", raw)
	}
	var metadata map[string]any
	if err := json.Unmarshal(raw, &metadata); err != nil {
		return nil, err
	}
	if len(metadata) == 0 {
		return nil, nil // an empty object says nothing; nil re-encodes exactly
	}
	return metadata, nil
}

const maxPort = 65535

// splitNodeAddr splits a map-form node key: "host", "host:port", "[ipv6]" or "[ipv6]:port".
func splitNodeAddr(addr string) (host string, port int, err error) {
	host, portText := addr, ""
	if strings.HasPrefix(addr, "[") {
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return "", 0, errors.New("missing ']' after the IPv6 address")
		}
		host, portText = addr[1:end], addr[end+1:]
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() {
			return "", 0, errors.New("only an IPv6 address goes in brackets")
		}
		if portText != "" && portText[0] != ':' {
			return "", 0, errors.New("expected ':port' after ']'")
		}
		portText = strings.TrimPrefix(portText, ":")
	} else if colons := strings.Count(addr, ":"); colons > 1 {
		return "", 0, errors.New(errIPv6Brackets + `, e.g. "[::1]:80"`)
	} else if colons == 1 {
		host, portText, _ = strings.Cut(addr, ":")
	}
	if err := checkNodeHost(host); err != nil {
		return "", 0, err
	}
	if portText == "" && !strings.HasSuffix(addr, ":") {
		return host, 0, nil
	}
	port, err = strconv.Atoi(portText)
	if err != nil || port < 1 || port > maxPort || !decimalDigits(portText) {
		return "", 0, fmt.Errorf("port must be 1-%d", maxPort)
	}
	return host, port, nil
}

// checkNodeHost accepts an IP address (IPv6 with or without brackets) or a DNS name.
func checkNodeHost(host string) error {
	if bare := trimBrackets(host); bare != host {
		if ip, err := netip.ParseAddr(bare); err == nil && ip.Is6() {
			return nil
		}
		return fmt.Errorf("host %q: only an IPv6 address goes in brackets", host)
	}
	if _, err := netip.ParseAddr(host); err == nil || isDNSName(host) {
		return nil
	}
	return fmt.Errorf("host %q is neither an IP address nor a valid DNS name", host)
}

func trimBrackets(host string) string {
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		return host[1 : len(host)-1]
	}
	return host
}

// isDNSName reports whether name is a host name: dot-separated labels of 1–63 letters,
// digits, hyphens and underscores, not starting or ending with a hyphen, at most 253
// characters, with an optional final dot. That is RFC 1123 plus the underscore, which
// APISIX's host pattern allows, Docker's and Compose's DNS names often hold (my_backend),
// and Go's resolver looks up. A last label of digits only is refused, so that a mistyped
// IPv4 address such as 256.1.1.1 is reported instead of being looked up as a name.
func isDNSName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isAlnum(label[i]) && label[i] != '-' && label[i] != '_' {
				return false
			}
		}
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	return !decimalDigits(last)
}
