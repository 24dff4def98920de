package proxy

import (
	"math"
	"math/rand/v2"
	"time"

	"gw/internal/monotime"
)

// Peak EWMA (type ewma), after APISIX's ewma.lua (itself after Finagle's PeakEwma): each
// node keeps an exponentially weighted moving average of its response time, and a request
// goes to the better of two nodes drawn at random ("power of two choices"), which spreads
// load without herding onto the one best node. The average decays with time, not with the
// number of samples: a sample taken dt after the previous one has weight 1 - e^(-dt/τ),
// τ = ewmaDecay = 10 s, APISIX's DECAY_TIME. A score read between samples decays towards 0
// the same way, so an idle node (a slow one that lost every draw) is tried again after a
// while. Unlike APISIX, a sample above the current average replaces it at once (the
// "peak" in Finagle's name), so a node that turns slow loses traffic on its first slow
// answer rather than over seconds. A node that refuses or times out a connection is scored
// as if it took the whole connect timeout. Averages are per compiled upstream and per
// worker process (APISIX shares them between its workers through a shared dict).

// ewmaDecay is τ, the time constant of the moving average.
const ewmaDecay = 10 * time.Second

// ewmaStat is one node's average response time, in nanoseconds, as of touched (monotime.Now;
// 0 means no sample yet).
type ewmaStat struct {
	value   float64
	touched int64
}

// score is the average as of now, decayed towards 0 since the last sample.
func (s *ewmaStat) score(now int64) float64 {
	if s.touched == 0 {
		return 0
	}
	return s.value * decayWeight(now-s.touched)
}

// observe folds one response time into the average.
func (s *ewmaStat) observe(rtt float64, now int64) {
	if s.touched == 0 {
		s.value = rtt
	} else if w := decayWeight(now - s.touched); rtt > s.value*w {
		s.value = rtt
	} else {
		s.value = s.value*w + rtt*(1-w)
	}
	s.touched = now
}

// decayWeight is e^(-dt/τ), the share of the old average kept after dt nanoseconds.
func decayWeight(dt int64) float64 {
	if dt <= 0 {
		return 1
	}
	return math.Exp(-float64(dt) / float64(ewmaDecay))
}

// pickEWMA draws two different eligible nodes at random and returns the one with the
// lower score; the only eligible node when there is one; -1 when none is left.
func (u *Upstream) pickEWMA(tried []uint64) int {
	s := u.state
	s.mu.Lock()
	defer s.mu.Unlock()
	top := u.topPriority(tried)
	count := 0
	for i := range u.nodes {
		if u.eligible(i, tried, top) {
			count++
		}
	}
	switch count {
	case 0:
		return -1
	case 1:
		return u.nthEligible(0, tried, top)
	}
	a := rand.IntN(count)
	b := rand.IntN(count - 1)
	if b >= a {
		b++
	}
	ia, ib := u.nthEligible(a, tried, top), u.nthEligible(b, tried, top)
	now := monotime.Now()
	if s.ewma[ib].score(now) < s.ewma[ia].score(now) {
		return ib
	}
	return ia
}

// nthEligible is the index of the n-th (from 0) eligible node.
func (u *Upstream) nthEligible(n int, tried []uint64, top int) int {
	for i := range u.nodes {
		if u.eligible(i, tried, top) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// observeEWMA records how long node i took to answer one try.
func (u *Upstream) observeEWMA(i int, rtt time.Duration) {
	s := u.state
	s.mu.Lock()
	s.ewma[i].observe(float64(rtt), monotime.Now())
	s.mu.Unlock()
}
