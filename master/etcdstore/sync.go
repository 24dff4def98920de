package etcdstore

import (
	"context"
	"errors"
	"time"

	"gw/master/store"
)

// Logger is the part of the master's error log Sync uses.
type Logger interface {
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
}

// Load lists etcd into st: every object under the prefix replaces what st held (a cached
// copy), at the list's revision. It returns the changes, as store.Replace does.
func (c *Client) Load(ctx context.Context, st *store.Store) ([]store.Change, error) {
	objects, revision, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	return st.Replace(objects, revision), nil
}

// Sync keeps st in step with etcd until ctx ends: it watches from st's revision on when
// listed (Load has just filled st), else lists first. After each list and each watch
// batch it calls publish with the changes made and the revision st is at, one call at a
// time. A compaction, or a watch that breaks, is followed by a new list; while etcd does
// not answer it retries every second or two, and st keeps what it has.
func (c *Client) Sync(ctx context.Context, st *store.Store, listed bool, publish func([]store.Change, uint64), log Logger) {
	go c.reportReachability(ctx, st, listed, log)
	down := false
	for ctx.Err() == nil {
		if !listed {
			changes, err := c.Load(ctx, st)
			if err != nil {
				if !down && ctx.Err() == nil {
					log.Warnf("etcd: %v; serving the config of revision %d until it answers", err, st.Revision())
				}
				down = true
				sleep(ctx, 2*time.Second)
				continue
			}
			if down {
				log.Infof("etcd answers again: caught up to revision %d", st.Revision())
			}
			down, listed = false, true
			publish(changes, st.Revision())
		}
		err := c.watch(ctx, st.Revision()+1, func(changes []store.Applied, revision uint64) {
			publish(st.Apply(changes, revision), st.Revision())
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errCompacted) {
			log.Warnf("etcd: %v: listing everything again", err)
		} else {
			log.Warnf("etcd: watch from revision %d: %v: listing everything again", st.Revision()+1, err)
			sleep(ctx, time.Second)
		}
		listed = false
	}
}

// reportReachability writes a line to the error log each time etcd stops or starts
// answering the probe. The client rides out an outage inside one watch, retrying
// silently, so without it a running node's log would not say that it serves a config etcd
// may have moved past. reachable is what the start found.
func (c *Client) reportReachability(ctx context.Context, st *store.Store, reachable bool, log Logger) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.Reachable()
		if now == reachable {
			continue
		}
		reachable = now
		if now {
			// At warn, the level of the line it ends: a log that shows an outage shows
			// its end.
			log.Warnf("etcd answers again, at revision %d", c.Revision())
			continue
		}
		why := "no answer"
		if p := c.probeErr.Load(); p != nil {
			why = *p
		}
		log.Warnf("etcd does not answer (%s); serving the config of revision %d until it does", why, st.Revision())
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
