# gw: the two commands a new user needs are `make run` and `make test`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO ?= go

.PHONY: build run test unit integration microbench bench fuzz pgo vet clean

# With two lines of Go's runtime changed (the poller's order and the monitor thread's pace;
# see tools/runtime-overlay.sh). `bin/gwctl --version` says whether a binary has them.
build:
	$(GO) build $$(GO=$(GO) tools/runtime-overlay.sh bin/goruntime) -ldflags "$(LDFLAGS)" -o bin/gwctl ./cmd/gwctl

# Runs the gateway in the foreground on the repository's conf/config.yaml, which holds
# exactly the embedded defaults: data port 9080, Admin API 127.0.0.1:9180. Ctrl-C stops it.
run: build
	bin/gwctl start --foreground

test: vet unit integration

vet:
	$(GO) vet ./...

# Twice: plain, so the zero-allocation tests run (the race detector makes sync.Pool drop
# items, so they skip under -race), then with the race detector.
unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration)
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)

integration:
	$(GO) test -count=1 -timeout 10m ./integration/...

# Micro-benchmarks beside the code, with allocations: router lookup among 10,000 routes,
# one request through the worker handler with limit-count + prometheus, the shm counter,
# metric recording, and the rest.
microbench:
	$(GO) test -run '^$$' -bench . -benchmem ./worker/... ./shm/... ./plugins/... ./ipc/... ./conf/... ./master/...

# Every fuzz target (func FuzzXxx in a _test.go file) for FUZZTIME each, one at a time.
# A failing input is written to the package's testdata/fuzz/FuzzXxx/ and fails the run;
# commit it with the fix, as a regression test. CI runs it briefly (FUZZTIME=3s).
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) tools/fuzz.sh

# gw against nginx with wrk, pinned to CPUs; see benchmark/README.md. Pass options with
# BENCH_ARGS, e.g. make bench BENCH_ARGS="--workers 1 --duration 5s".
bench:
	benchmark/run.sh $(BENCH_ARGS)

# Refreshes cmd/gwctl/default.pgo, the worker profile `go build` optimizes gwctl with
# (profile-guided optimization), from a benchmark run; needs wrk and nginx.
pgo:
	tools/pgo.sh

clean:
	rm -rf bin logs data
