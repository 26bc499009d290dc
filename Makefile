# floodgate's build. `make test` is the one command CI runs (.ci/run).

GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
FUZZTIME ?= 30s

# The linters, pinned. go run fetches and builds each version once (into the module and build caches),
# outside the modules' requirements, so a fresh machine needs nothing but Go.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE ?= $(GO) run golang.org/x/tools/cmd/deadcode@v0.52.0

# floodgate's release, from its one place (floodgate.Version in version.go): `make -s version` prints it,
# for `docker build --build-arg VERSION=...` (deploy/Dockerfile); make image's mkimage reads the constant itself.
VERSION := $(shell sed -n 's/^const Version = "\(.*\)"$$/\1/p' version.go)

.PHONY: test check-go vet lint redis build image version fuzz bench chaos

## test: vet, gofmt, lint, and every test with the race detector, the Redis tests against real
## redis-servers; then the bench module's tests (the middleware's loopback load test among them) and
## the deploy module's (the image built and run, the manifests, dashboard and alerts checked)
test: check-go vet lint redis
	$(GO) test -race ./...
	$(GO) test -race -tags plot ./cmd/floodgate/
	cd bench && $(GO) test -race ./...
	cd deploy && GOROOT=$$($(GO) env GOROOT) $(GO) test -race -timeout 30m ./...

## chaos: the fault suite alone: the tests named TestChaos*, which stop, kill and restart real
## redis-servers and Cluster masters, damage a running store's file, kill check processes and flood
## the memory store with keys. make test runs them too, with everything else.
chaos: check-go redis
	$(GO) test -race -count=1 -run Chaos ./...

## redis: redis-server and redis-cli for the Redis tests (internal/redistest), installed with apt-get when
## missing and make runs as root; otherwise it says how to get them. It never fails: without them the Redis
## tests skip, or fail when CI is set.
redis:
	@if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make: installing redis-server and redis-tools with apt-get, for the Redis tests"; \
	  { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null; } || \
	  echo "make: could not install redis-server: the Redis tests will skip (or fail, when CI is set)" >&2; \
	else \
	  echo "make: redis-server or redis-cli is not on PATH: the Redis tests will skip (or fail, when CI is set);" \
	    "install Debian's redis-server and redis-tools packages, or run make test as root to have them installed" >&2; \
	fi

check-go:
	@$(GO) version >/dev/null 2>&1 || { echo "make test: Go 1.26 or later is needed (https://go.dev/dl/); none found on PATH or in /usr/local/go" >&2; exit 1; }

vet:
	$(GO) vet ./...
	$(GO) vet -tags plot ./cmd/floodgate/
	cd bench && $(GO) vet ./...
	cd deploy && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi

## lint: staticcheck, and deadcode -test (functions that nothing reaches, not even a test), on the root
## module, on bench/ and on deploy/; then .ci/commits (every commit subject since the rule reads `pkg: what
## changed` in at most 72 characters); it fails when any reports anything, after running them all
lint: check-go
	@fail=0; for dir in . bench deploy; do \
	  echo "staticcheck ./... and deadcode -test ./... in $$dir"; \
	  for tool in "$(STATICCHECK) ./..." "$(DEADCODE) -test ./..."; do \
	    out=$$(cd $$dir && $$tool) || fail=1; \
	    if [ -n "$$out" ]; then printf '%s\n' "$$out" | sed "s|^|$$dir/|; s|^\./||"; fail=1; fi; \
	  done; \
	done; \
	echo "staticcheck and deadcode -test with -tags plot (simulate --plot) in ."; \
	for tool in "$(STATICCHECK) -tags plot ./..." "$(DEADCODE) -tags plot -test ./..."; do \
	  out=$$($$tool) || fail=1; \
	  if [ -n "$$out" ]; then printf '%s\n' "$$out"; fail=1; fi; \
	done; \
	if ! bash .ci/commits; then fail=1; fi; \
	if [ $$fail != 0 ]; then echo "make lint: fix what staticcheck, deadcode and .ci/commits report above" >&2; fi; \
	exit $$fail

## build: the floodgate command, in ./floodgate, with simulate --plot (the plot tag: gonum.org/v1/plot,
## which a plain go build, go run and the image leave out)
build: check-go
	$(GO) build -buildvcs=auto -tags plot ./cmd/floodgate

## image: floodgate's container image, without a Docker daemon (deploy/cmd/mkimage): a static binary,
## user 65532, labelled with floodgate.Version, into floodgate-image.tar for `docker load -i` or `podman load -i` (IMAGE_ARCH: another GOARCH)
image: check-go
	cd deploy && GOROOT=$$($(GO) env GOROOT) $(GO) run ./cmd/mkimage -root .. -tar ../floodgate-image.tar $(if $(IMAGE_ARCH),-arch $(IMAGE_ARCH))

## version: floodgate's release (floodgate.Version), for the Dockerfile's VERSION build argument
version:
	@echo $(VERSION)

## fuzz: each fuzz target for FUZZTIME (the seed corpora also run in `make test`)
fuzz: check-go
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
	  done; \
	done

## bench: the root module's benchmarks (10 runs each) into bench.txt, then floodgate against its peers
## (module bench/, 6 runs each, in memory, on a Redis it starts, as middleware and as a service, and as a service on
## that Redis beside envoyproxy/ratelimit; then Gubernator from module bench/gubernator, which cannot build beside
## floodgate; 30-45 minutes) into bench/bench.txt, each summarised with benchstat when
## it is installed, then floodgate/peer ratios of the medians and floodgate's distance above the floor (bench's
## pseudo-peer "floor", the least work of any exact keyed limiter); BENCHCOUNT and BENCHTIME set -count and -benchtime
bench: check-go
	$(GO) test -run '^$$' -bench . -benchmem -count $(or $(BENCHCOUNT),10) $(if $(BENCHTIME),-benchtime $(BENCHTIME)) ./... | tee bench.txt
	@bs=$$(command -v benchstat || echo "$$($(GO) env GOPATH)/bin/benchstat"); \
	if [ -x "$$bs" ]; then "$$bs" bench.txt; else echo "(go install golang.org/x/perf/cmd/benchstat@latest for a summary)"; fi
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count $(or $(BENCHCOUNT),6) $(if $(BENCHTIME),-benchtime $(BENCHTIME)) -timeout 60m | tee bench.txt
	@grep -q '^ok' bench/bench.txt || { echo "make bench: the peer benchmarks failed: see bench/bench.txt" >&2; exit 1; }
	cd bench/gubernator && $(GO) test -run '^$$' -bench . -benchmem -count $(or $(BENCHCOUNT),6) $(if $(BENCHTIME),-benchtime $(BENCHTIME)) -timeout 30m | tee -a ../bench.txt
	@[ "$$(grep -c '^ok' bench/bench.txt)" -ge 2 ] || { echo "make bench: the Gubernator benchmarks failed: see bench/bench.txt" >&2; exit 1; }
	@bs=$$(command -v benchstat || echo "$$($(GO) env GOPATH)/bin/benchstat"); \
	if [ -x "$$bs" ]; then "$$bs" bench/bench.txt; else echo "(go install golang.org/x/perf/cmd/benchstat@latest for a summary)"; fi
	cd bench && $(GO) run ./cmd/ratios bench.txt
