package plugins

import (
	"gw/conf"
	"gw/shm"
)

// SegmentSpec describes a shared-memory segment: a plugin's (SegmentOwner) or one of the
// host's (RegisterSegment).
type SegmentSpec struct {
	Layout shm.Layout
	// Size returns the data size in bytes (a positive multiple of 8) for a configuration.
	// Sizes are fixed for the master's life: a reload that changes one fails.
	Size func(cfg *conf.Config) int
	// Init prepares a freshly created segment, in the master, before any worker maps it.
	Init func(seg *shm.Segment) error

	// FreeBytes, when set, reports the segment's free space, for the metrics export
	// (apisix_shared_dict_free_space_bytes); without it only the capacity is exported.
	// The master calls it at any time, while workers write to the segment.
	FreeBytes func(seg *shm.Segment) int
	// Evictions, when set, counts the live entries the segment's table dropped to make
	// room since the segment was made, for the metrics export
	// (gw_<segment name>_evictions_total, '-' written '_'). Called as FreeBytes is.
	Evictions func(seg *shm.Segment) uint64
}

// HealthSegment names the upstream health table's segment (shm/health.go), which the
// host registers: the master's checker writes it, every worker reads it and counts live
// traffic into it.
const HealthSegment = shm.HealthLayoutName

func init() {
	RegisterSegment(HealthSegment, &SegmentSpec{Layout: shm.HealthLayout, Size: healthSegmentSize, Init: shm.InitHealthTable})
}

// defaultHealthSegmentBytes is shm.health_check's default, for a Config that leaves it unset.
const defaultHealthSegmentBytes = 1 << 20

var healthSegmentSize = SizedBy(func(s *conf.Shm) int64 { return s.HealthCheck }, defaultHealthSegmentBytes)

// SizedBy is a SegmentSpec.Size that makes the whole segment, header included, the size
// config.yaml's shm section gives it (field picks the setting), or defaultBytes where the
// setting is unset (0) or there is no Config.
func SizedBy(field func(*conf.Shm) int64, defaultBytes int64) func(cfg *conf.Config) int {
	return func(cfg *conf.Config) int {
		total := defaultBytes
		if cfg != nil && field(&cfg.Shm) > 0 {
			total = field(&cfg.Shm)
		}
		return int(total-shm.HeaderSize) &^ 7
	}
}

// KeyedTableInit is a SegmentSpec.Init that lays out an empty shm.KeyedTable marked
// magic, for a segment that holds one table.
func KeyedTableInit(magic uint64) func(seg *shm.Segment) error {
	return func(seg *shm.Segment) error { return shm.InitKeyedTable(seg, magic) }
}

// hostSegments are the segments that belong to no plugin, by name, under registryMu.
var hostSegments = map[string]*SegmentSpec{}

// RegisterSegment asks for a shared-memory segment that belongs to no plugin, for the
// host's own tables (the upstream health table): the master creates it, hands it to every
// worker and to a new master on upgrade, exactly as a plugin's, and workers find it in
// Shared.Segments[name]. No route can configure it, as it is no plugin. Call it in
// init(); it panics on a name a plugin or another segment has taken.
func RegisterSegment(name string, spec *SegmentSpec) {
	if name == "" || spec == nil || spec.Size == nil {
		panic("BUG: plugins: RegisterSegment needs a name and a spec with its Size")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	_, plugin := registry[name]
	if _, dup := hostSegments[name]; dup || plugin {
		panic("BUG: plugins: duplicate registration of segment " + name)
	}
	hostSegments[name] = spec
}

// Segments lists every segment the master must create, the plugins' (by plugin name)
// and the host's.
func Segments() map[string]*SegmentSpec {
	specs := map[string]*SegmentSpec{}
	for _, p := range registered() {
		if so, ok := p.(SegmentOwner); ok {
			specs[p.Name()] = so.Segment()
		}
	}
	registryMu.RLock()
	defer registryMu.RUnlock()
	for name, spec := range hostSegments {
		specs[name] = spec
	}
	return specs
}
