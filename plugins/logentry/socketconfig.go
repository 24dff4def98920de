package logentry

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"gw/plugins/batch"
	"gw/plugins/pluginconf"
)

// SocketConfig is what tcp-logger, udp-logger and syslog configure alike, which each
// embeds in its Config: the collector's host and port, the entry and its format, and
// the batch processor.
type SocketConfig struct {
	// Host is the collector's host, as configured; Addr, host:port, is set by Check.
	Host, Addr string
	Entry      Options
	Format     *Format
	Batch      batch.Config

	port int64
}

// NewSocketConfig is a SocketConfig with APISIX's defaults, its processor named name.
func NewSocketConfig(name string) SocketConfig {
	c := SocketConfig{Batch: batch.Defaults(), port: -1}
	c.Batch.Name = name
	return c
}

// Take decodes m if it is one of the shared fields, refusing with "is not supported
// yet" those APISIX's loggers have and these do not (include_resp_body and the
// expressions); taken is false for any other field.
func (c *SocketConfig) Take(m pluginconf.Member) (taken bool, err error) {
	if taken, err := c.Batch.Take(m); taken {
		return true, err
	}
	switch m.Name {
	case "host":
		c.Host, err = m.NonEmptyString()
	case "port":
		c.port, err = m.IntIn(1, 65535)
	case "log_format":
		c.Format, err = ParseFormat(m)
	case "include_req_body":
		c.Entry.RequestBody, err = m.Bool()
	case "include_resp_body", "include_req_body_expr", "include_resp_body_expr":
		err = fmt.Errorf("%s: is not supported yet", m.Name)
	case "_meta":
		err = m.Object()
	default:
		return false, nil
	}
	return true, err
}

// Check requires host and port and sets Addr.
func (c *SocketConfig) Check() error {
	switch {
	case c.Host == "":
		return errors.New("host: required")
	case c.port < 0:
		return errors.New("port: required")
	}
	c.Addr = net.JoinHostPort(c.Host, strconv.FormatInt(c.port, 10))
	return nil
}
