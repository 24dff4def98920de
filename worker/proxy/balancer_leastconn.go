package proxy

import (
	"sync/atomic"

	"gw/conf"
)

// Least connections (type least_conn): a request goes to the node with the fewest requests
// in flight relative to its weight, (in flight + 1) / weight, which is APISIX's score.
// Requests are counted per compiled upstream in this worker process only, as each nginx
// worker of APISIX counts its own: with several workers each balances its own share. A
// request stays counted until its response body has been sent (or its websocket tunnel has
// closed), not just until the response header arrives.

// pickLeastConn returns the eligible node with the lowest score and counts the request on
// it; -1 when no node is left. Ties go to the nodes in turn, starting one further on each
// pick, so that equal nodes share sequential traffic instead of the first taking it all.
func (u *Upstream) pickLeastConn(tried []uint64) int {
	s := u.state
	s.mu.Lock()
	top := u.topPriority(tried)
	n := len(u.nodes)
	best := -1
	var bestLoad, bestWeight int64
	for k := range n {
		i := s.next + k
		if i >= n {
			i -= n
		}
		if !u.eligible(i, tried, top) {
			continue
		}
		load, weight := s.inflight[i].Load()+1, int64(u.nodes[i].weight)
		// load/weight < bestLoad/bestWeight, without division.
		if best < 0 || load*bestWeight < bestLoad*weight {
			best, bestLoad, bestWeight = i, load, weight
		}
	}
	if best >= 0 {
		s.inflight[best].Add(1)
		s.next++
		if s.next >= n {
			s.next = 0
		}
	}
	s.mu.Unlock()
	return best
}

// inflightOf is node i's in-flight counter for a least_conn upstream, nil otherwise.
func (u *Upstream) inflightOf(i int) *atomic.Int64 {
	if u.balancer != conf.BalanceLeastConn {
		return nil
	}
	return &u.state.inflight[i]
}
