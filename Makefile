# lancemaster — see README.md
GO      ?= go
GOFMT   ?= gofmt
MODULE  := github.com/lancemaster/lancemaster
BIN     := bin/lancemaster
THRIFT  ?= thrift
IDL     := idl/wire.thrift idl/admin.thrift idl/journal.thrift
CLUSTER := deploy/local/cluster.sh

# Hand-written Go files: everything but the generated code (make gen
# gofmt's that itself) and what never belongs to the module.
GO_SOURCES = $(shell find . -name '*.go' -not -path './gen-go/*' -not -path './.git/*' \
               -not -path '*/node_modules/*' -not -path './deploy/local/.state/*')

.PHONY: build test fuzz gen bench setup demo demo-down certs vet fmt fmt-check clean builder-modules screenshots

# What `lancemaster version`, lancemaster_build_info and backend heartbeats
# say (pkg/version). -buildvcs=auto also stamps the commit into the build
# info (`go version -m bin/lancemaster`), whatever GOFLAGS says.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS    := -X $(MODULE)/pkg/version.version=$(VERSION) -X $(MODULE)/pkg/version.revision=$(REVISION) \
              -X $(MODULE)/pkg/version.buildDate=$(BUILD_DATE)

build:
	$(GO) build -buildvcs=auto -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lancemaster

gen:
	rm -rf gen-go/wire gen-go/adminapi gen-go/journal
	@for f in $(IDL); do \
	  $(THRIFT) --gen go:package_prefix=$(MODULE)/gen-go/,skip_remote -out gen-go $$f || exit 1; \
	done
	gofmt -w gen-go

# The README's test command; CI runs it (.ci/run). The end-to-end tests
# and the builder's own tests need the builder's pinned npm packages: they
# are installed first when missing (as make demo does), and a real-builder
# test fails rather than skips without them.
BUILDER_MODULES := builders/lancedb/node_modules/@lancedb/lancedb

test: fmt-check vet builder-modules
	$(GO) test -race -count=1 -timeout 15m ./...
	cd builders/lancedb && node --test test/

builder-modules:
	@[ -d $(BUILDER_MODULES) ] || $(MAKE) setup

vet:
	$(GO) vet ./...

# Runs each fuzz target for FUZZTIME (go test -fuzz takes one target in one
# package at a time); CI runs it after make test. The committed seed corpora
# (testdata/fuzz/<target>/) also run as plain tests in make test. A failing
# input is written to the package's testdata/fuzz/<target>/: commit it with
# the fix, as a regression test.
FUZZTIME     ?= 10s
FUZZ_TARGETS := FuzzApply:./pkg/raftfsm FuzzAdmitBatch:./pkg/raftfsm/jobcodec FuzzAppendTimeline:./pkg/job FuzzReport:./pkg/report FuzzAdminRequest:./pkg/admin

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  name=$${t%%:*}; pkg=$${t#*:}; \
	  echo "==> $$name ($$pkg) for $(FUZZTIME)"; \
	  scripts/fuzz-one.sh $(GO) $$name $$pkg $(FUZZTIME); \
	done

# Fails listing the files gofmt would change; `make fmt` fixes them.
fmt-check:
	@unformatted=$$($(GOFMT) -l $(GO_SOURCES) </dev/null); \
	if [ -n "$$unformatted" ]; then \
	  echo "gofmt would change these files (run 'make fmt'):"; \
	  echo "$$unformatted"; \
	  exit 1; \
	fi

fmt:
	$(GOFMT) -w $(GO_SOURCES)

bench:
	$(GO) run ./cmd/lancemaster-bench $(BENCH_ARGS)

# Install the builder's pinned npm packages (builders/lancedb/package-lock.json).
setup:
	cd builders/lancedb && npm ci --no-audit --no-fund

# The whole thing on 127.0.0.1: three masters, a backend, a real dataset and
# real IVF_PQ and BTREE builds to COMMITTED / DONE (deploy/local/demo.sh).
demo: build builder-modules
	LANCEMASTER_BIN=$(CURDIR)/$(BIN) deploy/local/demo.sh

demo-down:
	LANCEMASTER_BIN=$(CURDIR)/$(BIN) $(CLUSTER) down

# A development CA and one certificate per role (master, backend, operator)
# for mutual TLS (docs/rpc.md), under deploy/local/.state/certs (never
# committed). Run it again to rotate the certificates: the CA is kept.
# `make demo` stays plaintext.
CERTS_DIR   ?= deploy/local/.state/certs
CERTS_HOSTS ?= 127.0.0.1,localhost
certs: build
	$(BIN) certs init --dir $(CERTS_DIR) --hosts $(CERTS_HOSTS)

clean:
	rm -rf bin

# The console's screenshots (docs/console.md): the browser test against
# fixture API answers (pkg/console) in headless chromium, writing one PNG
# per page (console-jobs.png, console-job.png, ...) into SCREENSHOT_DIR.
# Only docs/images/console-jobs.png is committed.
SCREENSHOT_DIR ?= docs/images
screenshots:
	LANCEMASTER_SCREENSHOT_DIR=$(CURDIR)/$(SCREENSHOT_DIR) $(GO) test -count=1 -run '^TestConsolePagesAgainstFixtureAPI$$' ./pkg/console
	@ls -1 $(SCREENSHOT_DIR)/console-*.png

# Randomized fault schedules (pkg/faults, docs/faults.md): runs seeds from
# FAULTS_SEED0 (default: the clock) for FAULTS_DURATION and prints how many
# schedules ran per minute. A failing seed prints the command that replays
# it; FAULTS_SEEDS=8,24 replays a list instead. make test runs 4 seeds.
FAULTS_DURATION ?= 5m
FAULTS_SEED0    ?= $(shell date +%s)
FAULTS_SEEDS    ?=
FAULTS_RACE     ?= -race
FAULTS_PARALLEL ?= 1
FAULTS_STORE    ?=
.PHONY: fault-schedules
fault-schedules:
	$(GO) test $(FAULTS_RACE) -count=1 -timeout 3h -run '^TestFaultSchedules$$' -v ./pkg/faults \
	  $(if $(FAULTS_SEEDS),-faults.seeds=$(FAULTS_SEEDS),-faults.duration=$(FAULTS_DURATION) -faults.seed0=$(FAULTS_SEED0) -faults.parallel=$(FAULTS_PARALLEL)) \
	  $(if $(FAULTS_STORE),-faults.store=$(FAULTS_STORE))

# The evidence figures (docs/benchmarks.md, "evidence"): seconds from a
# backend's restart after kill -9, and from a worker's SIGKILL, to the job's
# outcome, measured by the real-builder end-to-end tests; each run prints
# its "figure:" lines. EVIDENCE_RUNS repeats them.
EVIDENCE_RUNS ?= 3
.PHONY: evidence-figures
evidence-figures: builder-modules
	$(GO) test -count=$(EVIDENCE_RUNS) -run '^TestEndToEnd(BackendKill9DuringBuild|WorkerKilledWithoutResult)$$' -v ./pkg/master \
	  | grep -E 'figure:|^(ok|FAIL|--- FAIL)'

# The master and backend images (deploy/docker, docs/operations.md
# "Containers"), tagged IMAGE_PREFIX-master:IMAGE_TAG and
# IMAGE_PREFIX-backend:IMAGE_TAG. The build context is the repository; no
# .git goes in, so the version is passed in.
.PHONY: image
DOCKER       ?= docker
IMAGE_PREFIX ?= lancemaster
IMAGE_TAG    ?= $(VERSION)
IMAGE_ARGS    = --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg BUILD_DATE=$(BUILD_DATE)

image:
	$(DOCKER) build -f deploy/docker/master.Dockerfile $(IMAGE_ARGS) -t $(IMAGE_PREFIX)-master:$(IMAGE_TAG) .
	$(DOCKER) build -f deploy/docker/backend.Dockerfile $(IMAGE_ARGS) -t $(IMAGE_PREFIX)-backend:$(IMAGE_TAG) .
