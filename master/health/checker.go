package health

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"

	"gw/conf"
	"gw/shm"
)

// Logger is where state changes and trouble are reported (the master's error log).
type Logger interface {
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
}

// Checker keeps one prober per checked upstream running, following the config snapshots
// it is given. Its methods are safe for concurrent use.
type Checker struct {
	table *shm.HealthTable
	log   Logger

	mu      sync.Mutex
	probers map[string]*prober // by fingerprint: name and the upstream's JSON
	stopped bool
	full    bool // the table could not hold every node at the last Update
}

// New makes a Checker that keeps node health in table.
func New(table *shm.HealthTable, log Logger) *Checker {
	return &Checker{table: table, log: log, probers: map[string]*prober{}}
}

// Update makes the table and the probers follow snap: entries for every checked node are
// in the table when it returns (so a worker given snap finds them), probers of upstreams
// that changed or went away are stopped, and new ones started. After Stop it does nothing.
func (c *Checker) Update(snap *conf.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	checked := snap.CheckedUpstreams()
	wanted := make(map[string]conf.CheckedUpstream, len(checked))
	keys := map[uint64]bool{}
	for _, cu := range checked {
		body, err := json.Marshal(cu.Upstream)
		if err != nil {
			c.log.Warnf("health check of %s off: encoding its upstream: %v", cu.Name, err)
			continue
		}
		wanted[cu.Name+"\x00"+string(body)] = cu
		for i := range cu.Upstream.Nodes {
			keys[shm.HealthKey(cu.Name, cu.Upstream.NodeAddress(&cu.Upstream.Nodes[i]))] = true
		}
	}
	for fp, p := range c.probers {
		if _, ok := wanted[fp]; !ok {
			p.stop()
			delete(c.probers, fp)
		}
	}
	homeless := c.table.Sync(keys)
	if len(homeless) > 0 && !c.full {
		c.log.Warnf("shm.health_check holds %d nodes and is too full for %d more: those are not checked and always used; raise shm.health_check and restart",
			c.table.Capacity(), len(homeless))
	}
	c.full = len(homeless) > 0
	for fp, cu := range wanted {
		if _, ok := c.probers[fp]; ok {
			continue
		}
		p := newProber(cu, c.table, c.log)
		c.probers[fp] = p
		p.start()
	}
}

// Stop stops every prober and waits for them. Entries stay in the table, for the workers
// still serving and for a new master after an upgrade.
func (c *Checker) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for fp, p := range c.probers {
		p.stop()
		delete(c.probers, fp)
	}
}

// Status is one checked node's health, for apisix_upstream_status.
type Status struct {
	// Name is the upstream's key, e.g. /apisix/upstreams/1 or /apisix/routes/1.
	Name    string
	Host    string
	Port    string
	Healthy bool
}

// Statuses lists every checked node's health, sorted by name, host and port.
func (c *Checker) Statuses() []Status {
	c.mu.Lock()
	var out []Status
	for _, p := range c.probers {
		for _, n := range p.nodes {
			host, port, _ := net.SplitHostPort(n.addr)
			out = append(out, Status{Name: p.name, Host: host, Port: port, Healthy: n.entry.Healthy()})
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return strings.Compare(a.Port, b.Port)
	})
	return out
}

// prober probes one upstream's nodes.
type prober struct {
	name   string
	active conf.ActiveCheck
	nodes  []*probedNode
	log    Logger
	probe  func(ctx context.Context, n *probedNode) (shm.HealthEvent, bool)

	cancel context.CancelFunc
	ctx    context.Context
	done   sync.WaitGroup
	slots  chan struct{} // active.concurrency tokens, shared by both rounds
}

// probedNode is one distinct node address of the upstream.
type probedNode struct {
	addr  string // host:port the proxy uses, the table's key
	probe string // host:port probed: active.port replaces the port
	entry shm.HealthNode

	mu       sync.Mutex
	lastSeen bool // health at the last look, to log changes made by passive checks
}

func newProber(cu conf.CheckedUpstream, table *shm.HealthTable, log Logger) *prober {
	p := &prober{name: cu.Name, active: *cu.Upstream.Checks.Active, log: log}
	seen := map[string]bool{}
	for i := range cu.Upstream.Nodes {
		n := &cu.Upstream.Nodes[i]
		addr := cu.Upstream.NodeAddress(n)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		probe := addr
		if p.active.Port != 0 {
			probe = net.JoinHostPort(n.Host, itoa(p.active.Port))
		}
		entry, _ := table.Lookup(shm.HealthKey(cu.Name, addr)) // none: the table is full, never probed
		if !entry.Valid() {
			continue
		}
		p.nodes = append(p.nodes, &probedNode{addr: addr, probe: probe, entry: entry, lastSeen: entry.Healthy()})
	}
	p.probe = newProbeFunc(&p.active)
	return p
}

func (p *prober) start() {
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.slots = make(chan struct{}, p.active.Concurrency)
	p.done.Add(2)
	go p.round(true, secondsOf(p.active.Healthy.Interval))
	go p.round(false, secondsOf(p.active.Unhealthy.Interval))
}

func (p *prober) stop() {
	p.cancel()
	p.done.Wait()
}
