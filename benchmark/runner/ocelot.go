package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Seed 001's ab run: 20000 requests, 1000 at a time, each on a new connection.
const (
	ocelotRequests = 20000
	ocelotClients  = 1000
)

// ocelotRoute asks gw to rewrite /api1/... to /api/... as seed 001's nginx does; the plain
// route is the fallback while gw has no proxy-rewrite plugin.
func ocelotRoute(upstream string, rewrite bool) string {
	pluginSet := `{}`
	if rewrite {
		pluginSet = `{"proxy-rewrite":{"regex_uri":["^/api1/(.*)","/api/$1"]}}`
	}
	return fmt.Sprintf(`{"uri":"/api1/*","plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, pluginSet, upstream)
}

// runOcelot reproduces seed 001 with gw in Ocelot's place: ab through gw and through
// nginx, each run once to warm up (the seed discards the first run too) and once measured.
func (s *sweep) runOcelot() (*Ocelot, error) {
	o := s.opts
	res := &Ocelot{Workers: s.workers, Requests: ocelotRequests, Clients: ocelotClients}
	var err error
	if s.up, err = startUpstream(o.upstream, s.loadCPUs, o.bodyBytes, s.dir); err != nil {
		return nil, err
	}
	g, err := startGW(o.gwctl, filepath.Join(s.dir, "gw-ocelot"), s.gwCPUs, s.workers, o.accessLog, "")
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "gw", url: "http://" + g.data + "/api1/values", srv: g})
	code, body, err := g.putRoute(ocelotRoute(s.up.addr, true))
	if err != nil {
		return nil, err
	}
	res.Rewritten = code/100 == 2
	if !res.Rewritten {
		res.Note = "gw has no proxy-rewrite plugin yet (Admin API: " + strings.TrimSpace(body) +
			"), so gw proxies /api1/values unchanged while nginx rewrites it to /api/values; the upstream answers both alike"
		fmt.Println("NOTE:", res.Note)
		if code, body, err := g.putRoute(ocelotRoute(s.up.addr, false)); err != nil || code/100 != 2 {
			return nil, fmt.Errorf("PUT route 1: %d %s %v", code, body, err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n, err := startNginx(o.nginx, filepath.Join(o.templates, "proxy.conf.tmpl"), filepath.Join(s.dir, "nginx-ocelot"), s.gwCPUs, nginxConf{
		Workers: s.workers, Listen: addr, Upstream: s.up.addr, Location: "/api1/", UpstreamPath: "/api/", AccessLog: o.accessLog,
	})
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "nginx", url: "http://" + addr + "/api1/values", srv: n})
	for _, t := range s.targets {
		if err := checkResponse(t.url, o.bodyBytes); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	args := func(url string) []string {
		// -r: count a reset connection as a failure instead of aborting the run.
		return []string{o.ab, "-r", "-n", strconv.Itoa(ocelotRequests), "-c", strconv.Itoa(ocelotClients), url}
	}
	for _, pass := range []string{"warm-up", "measured"} {
		for _, t := range s.targets {
			s.progress.step(fmt.Sprintf("ocelot (%s): ab -n %d -c %d through %s", pass, ocelotRequests, ocelotClients, t.name), 0)
			master, workers, err := t.srv.processes()
			if err != nil {
				return nil, err
			}
			pids := append([]int{master}, workers...)
			cpu0, err := cpuSeconds(pids)
			if err != nil {
				return nil, err
			}
			lr, err := runPinned(s.loadCPUs, args(t.url)...)
			if err != nil {
				return nil, err
			}
			cpu1, err := cpuSeconds(pids)
			if err != nil {
				return nil, err
			}
			ab, err := parseAB(lr.output)
			if err != nil {
				return nil, err
			}
			run := OcelotRun{abResult: ab}
			if ab.Complete > 0 {
				run.CPUPerRequestUS = (cpu1 - cpu0) * 1e6 / float64(ab.Complete)
			}
			fmt.Printf("    %8.0f req/s  failed %d  non-2xx %d  p99 %.0f ms  %.1f CPU µs/req\n",
				ab.RPS, ab.Failed, ab.Non2xx, ab.P99MS, run.CPUPerRequestUS)
			if pass == "measured" {
				if t.name == "gw" {
					res.GW = run
				} else {
					res.Nginx = run
				}
			}
		}
	}
	return res, nil
}
