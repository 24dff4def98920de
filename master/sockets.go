package master

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"gw/conf"
)

// listenBacklog asks for the largest accept queue; the kernel caps it at somaxconn. A deep
// queue is what lets a slot's connections wait, not fail, while its worker is replaced.
const listenBacklog = 65535

// slotSockets are the listening sockets of one address: one SO_REUSEPORT socket per worker
// slot. The master never accepts on them; it only keeps them open for its whole life so no
// queued connection is ever reset by a close.
type slotSockets struct {
	address string
	files   []*os.File
}

// openSlotSockets creates n SO_REUSEPORT listening sockets bound to address.
//
// Before creating the group it binds one plain socket to the address: SO_REUSEPORT would
// silently join a group that another gateway of the same user already listens on and steal
// its traffic, while a plain bind fails with "address already in use" as a user expects.
func openSlotSockets(address string, n int) (*slotSockets, error) {
	sa, family, err := sockaddr(address)
	if err != nil {
		return nil, err
	}
	if err := probeBind(sa, family); err != nil {
		return nil, fmt.Errorf("listen %s: %w", address, err)
	}
	set := &slotSockets{address: address}
	for i := 0; i < n; i++ {
		f, err := listenReusePort(sa, family, fmt.Sprintf("%s#%d", address, i))
		if err != nil {
			set.close()
			return nil, fmt.Errorf("listen %s (slot %d): %w", address, i, err)
		}
		set.files = append(set.files, f)
	}
	return set, nil
}

// grow adds sockets until there is one per slot for n workers. The group already exists,
// so no probe: binding into our own group is the point.
func (s *slotSockets) grow(n int) error {
	if len(s.files) >= n {
		return nil
	}
	sa, family, err := sockaddr(s.address)
	if err != nil {
		return err
	}
	for i := len(s.files); i < n; i++ {
		f, err := listenReusePort(sa, family, fmt.Sprintf("%s#%d", s.address, i))
		if err != nil {
			return fmt.Errorf("listen %s (slot %d): %w", s.address, i, err)
		}
		s.files = append(s.files, f)
	}
	return nil
}

func (s *slotSockets) close() {
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
}

// errAddressInUse is probeBind's answer for a port someone else listens on, worded as
// the kernel's, without the "bind:" that would only say which call found it.
var errAddressInUse = errors.New("address already in use")

func probeBind(sa unix.Sockaddr, family int) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if family == unix.AF_INET6 {
		// As the group it probes for (see listenReusePort): a dual-stack probe of [::]:p
		// would find 0.0.0.0:p, which may rightly be listed too, "in use".
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return errAddressInUse
		}
		return err
	}
	return nil
}

func listenReusePort(sa unix.Sockaddr, family int, name string) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, opt := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if family == unix.AF_INET6 {
		// "[::]:9080" means IPv6 only, as nginx's "listen [::]:9080" does (ipv6only=on),
		// so that 0.0.0.0:9080 may be listed beside it.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// listenStream listens on address for the master's own servers (admin, metrics, status)
// with the data plane's rules: "[::]:p" is IPv6 only and "0.0.0.0:p" IPv4 only, so both
// may be listed. net.Listen("tcp", ...) would make either wildcard one dual-stack socket;
// "tcp6" sets IPV6_V6ONLY.
func listenStream(address string) (net.Listener, error) {
	_, family, err := sockaddr(address)
	if err != nil {
		return nil, err
	}
	if family == unix.AF_INET6 {
		return net.Listen("tcp6", address)
	}
	return net.Listen("tcp4", address)
}

func sockaddr(address string) (unix.Sockaddr, int, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, 0, fmt.Errorf("listen address %q: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return nil, 0, fmt.Errorf("listen address %q: port must be 1-65535", address)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return nil, 0, fmt.Errorf("listen address %q: host must be an IP address", address)
	}
	if ip.Is4() || ip.Is4In6() {
		return &unix.SockaddrInet4{Port: port, Addr: ip.Unmap().As4()}, unix.AF_INET, nil
	}
	return &unix.SockaddrInet6{Port: port, Addr: ip.As16()}, unix.AF_INET6, nil
}

// ensureSockets opens what gen needs: every listen address with at least one socket per
// worker slot. Existing sockets are kept, so no queued connection is ever reset by a reload.
func (m *Master) ensureSockets(gen *generation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var opened []*slotSockets
	var addresses []string
	if gen.cfg.Deployment.ServesData() {
		addresses = gen.cfg.DataListen()
	}
	for _, address := range addresses {
		set, ok := m.sockets[address]
		if !ok {
			inherited, err := m.inheritedSockets(address)
			if err != nil {
				return err
			}
			if inherited != nil {
				if err := inherited.grow(gen.workers); err != nil {
					return err
				}
				m.sockets[address] = inherited
				opened = append(opened, inherited)
				continue
			}
			fresh, err := openSlotSockets(address, gen.workers)
			if err != nil {
				for _, s := range opened {
					s.close()
					delete(m.sockets, s.address)
				}
				return dataListenError(gen.cfg, address, err)
			}
			m.sockets[address] = fresh
			opened = append(opened, fresh)
			continue
		}
		if err := set.grow(gen.workers); err != nil {
			return err
		}
	}
	return nil
}

// closeUnusedSockets closes the sockets of addresses the current generation no longer
// listens on. Draining workers hold their own copies, so their open connections finish.
func (m *Master) closeUnusedSockets() {
	listen := m.currentConfig().DataListen()
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[string]bool{}
	for _, a := range listen {
		keep[a] = true
	}
	for address, set := range m.sockets {
		if !keep[address] {
			set.close()
			delete(m.sockets, address)
			m.log.Infof("stopped listening on %s", address)
		}
	}
}

// dataListenError names the config key of a data-plane address that could not be opened,
// and for a port in use says what to do: the bare "listen ...: address already in use"
// left a newcomer guessing which of gw's addresses it was.
func dataListenError(cfg *conf.Config, address string, err error) error {
	key := "node_listen"
	list := cfg.NodeListen
	if cfg.IsTLSListen(address) {
		key, list = "ssl.listen", cfg.SSL.Listen
	}
	for i, a := range list {
		if a == address {
			key = fmt.Sprintf("%s[%d]", key, i)
			break
		}
	}
	if errors.Is(err, errAddressInUse) || errors.Is(err, unix.EADDRINUSE) {
		_, port, _ := net.SplitHostPort(address)
		return fmt.Errorf("%s: %w; another process listens there (ss -ltnp 'sport = :%s' names it): stop it or change %s in conf/config.yaml", key, err, port, key)
	}
	return fmt.Errorf("%s: %w", key, err)
}
