# gw: the two commands a new user needs are `make run` and `make test`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO ?= go

.PHONY: build run test unit integration microbench bench fuzz pgo vet clean docker docker-rootfs install

# With two lines of Go's runtime changed (the poller's order and the monitor thread's pace;
# see tools/runtime-overlay.sh). `bin/gwctl --version` says whether a binary has them.
build:
	$(GO) build $$(GO=$(GO) tools/runtime-overlay.sh bin/goruntime) -ldflags "$(LDFLAGS)" -o bin/gwctl ./cmd/gwctl

# Installs bin/gwctl as $(PREFIX)/bin/gwctl, an instance directory $(GW_HOME) with the
# shipped conf/config.yaml (never over one already there: it is yours), and the systemd
# unit packaging/gw.service with those two paths in it, all under $(DESTDIR) when packaging.
# install(1) writes a new file and never into the old one, so a running master keeps its
# binary; `gwctl upgrade --prefix $(GW_HOME)` then moves it to the new one.
PREFIX ?= /usr/local
GW_HOME ?= /var/lib/gw
SYSTEMD_UNIT_DIR ?= /etc/systemd/system
install: build
	install -D -m 0755 bin/gwctl $(DESTDIR)$(PREFIX)/bin/gwctl
	install -d -m 0755 $(DESTDIR)$(GW_HOME)/conf
	test -e $(DESTDIR)$(GW_HOME)/conf/config.yaml || install -m 0644 conf/config.yaml $(DESTDIR)$(GW_HOME)/conf/config.yaml
	install -d -m 0755 $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed -e 's|/usr/local/bin/gwctl|$(PREFIX)/bin/gwctl|g' -e 's|/var/lib/gw|$(GW_HOME)|g' packaging/gw.service \
		>$(DESTDIR)$(SYSTEMD_UNIT_DIR)/gw.service
	@echo "installed; as root: systemctl daemon-reload && systemctl enable --now gw"

# The container image gw:$(VERSION) and gw:latest, built FROM scratch without pulling
# anything: docker-rootfs assembles the image's files here, and the image is the final
# stage of ./Dockerfile, copied out of it so that both ways build the same image.
DOCKER ?= docker
DOCKER_CONTEXT := bin/docker
docker: docker-rootfs
	sed -n '/^FROM scratch/,$$p' Dockerfile | sed 's|--from=build /src/$(DOCKER_CONTEXT)/||' >$(DOCKER_CONTEXT)/Dockerfile
	$(DOCKER) build -t gw:$(VERSION) -t gw:latest $(DOCKER_CONTEXT)

# A static gwctl (CGO off: scratch has no C library) with the same runtime overlay and
# profile as `make build`, the CA certificates for https upstreams and etcd, a passwd and
# group naming the non-root user gw (10001), the image's config, and logs/ and data/
# for that user (writable/, copied with --chown).
docker-rootfs:
	@test -f /etc/ssl/certs/ca-certificates.crt || { echo "no /etc/ssl/certs/ca-certificates.crt: install Debian's ca-certificates" >&2; exit 1; }
	rm -rf $(DOCKER_CONTEXT)
	mkdir -p $(DOCKER_CONTEXT)/rootfs/usr/local/bin $(DOCKER_CONTEXT)/rootfs/etc/ssl/certs \
		$(DOCKER_CONTEXT)/rootfs/usr/local/gw/conf $(DOCKER_CONTEXT)/writable/logs $(DOCKER_CONTEXT)/writable/data
	CGO_ENABLED=0 $(GO) build $$(GO=$(GO) tools/runtime-overlay.sh bin/goruntime) -ldflags "$(LDFLAGS)" \
		-o $(DOCKER_CONTEXT)/rootfs/usr/local/bin/gwctl ./cmd/gwctl
	install -m 0644 /etc/ssl/certs/ca-certificates.crt $(DOCKER_CONTEXT)/rootfs/etc/ssl/certs/
	install -m 0644 packaging/docker/passwd packaging/docker/group $(DOCKER_CONTEXT)/rootfs/etc/
	install -m 0644 packaging/docker/config.yaml $(DOCKER_CONTEXT)/rootfs/usr/local/gw/conf/config.yaml
	chmod 0700 $(DOCKER_CONTEXT)/writable/data # it holds consumers' credentials

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

# The timeout guards against a hang, nothing more: the suite took 412 s on a 2-CPU machine
# shared with a browser (this session), and CI's first run also builds the container image.
integration:
	$(GO) test -count=1 -timeout 20m ./integration/...

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
