package plugins

import (
	"testing"

	"gw/conf"
	"gw/shm"
)

func TestSizedByMakesTheWholeSegmentTheSetting(t *testing.T) {
	size := SizedBy(func(s *conf.Shm) int64 { return s.LimitConn }, 1<<20)
	for _, c := range []struct {
		name  string
		cfg   *conf.Config
		whole int64
	}{
		{"no config", nil, 1 << 20},
		{"unset", &conf.Config{}, 1 << 20},
		{"set", &conf.Config{Shm: conf.Shm{LimitConn: 65541}}, 65541},
		{"another setting", &conf.Config{Shm: conf.Shm{LimitReq: 65541}}, 1 << 20},
	} {
		got := size(c.cfg)
		if got%8 != 0 || int64(got+shm.HeaderSize) > c.whole || int64(got+shm.HeaderSize) <= c.whole-8 {
			t.Errorf("%s: data size %d, want the largest multiple of 8 that with the %d-byte header fits %d", c.name, got, shm.HeaderSize, c.whole)
		}
	}
}
