package router

import (
	"fmt"
	"slices"
)

// With returns a Router holding r's entries and e, placed as the order-th entry: order
// breaks ties between candidates of equal priority and path length, as an entry's index
// does in Build, so a caller that keeps each entry's order gets from With exactly the
// Router Build would make of the same entries. e.Value must be one no entry of r has. r
// is not changed and keeps serving lookups: With copies only the tree nodes on e's keys.
func (r *Router) With(e Entry, order int) (*Router, error) {
	places, err := placementsOf(&e, order, r.opts)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	next := *r
	for _, p := range places {
		add := func(list []candidate, _ bool) ([]candidate, bool) {
			// An entry listing one path (or host) twice is stored under it once, as in Build.
			for i := range list {
				if list[i].value == p.c.value && slices.Equal(list[i].pattern, p.c.pattern) {
					return list, true
				}
			}
			i, _ := slices.BinarySearchFunc(list, p.c, compareCandidates)
			return slices.Insert(slices.Clip(list), i, p.c), true
		}
		next.place(p, add)
	}
	next.entries++
	return &next, nil
}

// Without returns a Router holding r's entries but e, which must be as it was given to
// With or Build (its keys are where its candidates are found; its Value says which they
// are). r is not changed.
func (r *Router) Without(e Entry) *Router {
	places, err := placementsOf(&e, 0, r.opts)
	if err != nil {
		return r // never placed
	}
	next := *r
	for _, p := range places {
		remove := func(list []candidate, has bool) ([]candidate, bool) {
			kept := slices.DeleteFunc(slices.Clone(list), func(c candidate) bool { return c.value == e.Value })
			return kept, len(kept) > 0
		}
		next.place(p, remove)
	}
	next.entries--
	return &next
}

// place applies change to the candidate list of p's key, copying the nodes it passes.
func (r *Router) place(p placement, change func(list []candidate, has bool) ([]candidate, bool)) {
	if p.host == nil {
		r.withoutHosts = r.withoutHosts.update(p.path, change)
		return
	}
	hosts := r.withHosts
	if hosts == nil {
		hosts = &node[*node[[]candidate]]{}
	}
	hosts = hosts.update(*p.host, func(tree *node[[]candidate], has bool) (*node[[]candidate], bool) {
		if !has {
			tree = &node[[]candidate]{}
		}
		tree = tree.update(p.path, change)
		return tree, tree.hasExact || tree.hasPrefix || len(tree.children) > 0
	})
	if !hosts.hasExact && !hosts.hasPrefix && len(hosts.children) == 0 {
		hosts = nil
	}
	r.withHosts = hosts
}
