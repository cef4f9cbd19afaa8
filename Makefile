# The project's interface: CI and people call these targets, nothing else.
# Run `make` or `make help` for the list.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# VCS stamping fails in checkouts owned by another user and in trees without .git (CI, images).
GOFLAGS += -buildvcs=false
export GOFLAGS

# The modules of the workspace, as go.work lists them (./schemas ./shared ./services).
MODULES := $(shell go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')

BIN      := bin
COMMANDS := planner worker schedctl target gateway
VERSION  ?= $(shell git describe --tags --always 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/resched/resched/services/internal/version.linked=$(VERSION)

# Packages with benchmarks, as module/package:benchtime; add one line per package. The planner
# benchmarks do their whole workload once (1x) against a real redis-server and JetStream.
BENCH_PKGS = \
	shared/recurrence:$(BENCHTIME) \
	shared/jobschema:$(BENCHTIME) \
	services/internal/bus:$(BENCHTIME) \
	services/planner/internal/store:$(BENCHTIME) \
	services/planner/internal/dispatch:1x \
	services/planner/internal/intake:1x \
	services/planner/internal/api:1x \
	services/gateway/sdktest:1x \
	services/worker/internal/action/httpaction:$(BENCHTIME) \
	services/worker/internal/consumer:$(BENCHTIME) \
	services/worker:1x

BENCHTIME ?= 1s
FUZZTIME  ?= 30s
SOAKTIME  ?= 30m
TESTFLAGS ?=

.PHONY: help deps build test test-race bench bench-e2e fuzz run chaos soak tidy fmt lint clean

help: ## list the targets
	@echo "usage: make <target>"
	@echo
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 12 | sed 's/^/  /'

build: ## build bin/planner, bin/worker, bin/schedctl, bin/gateway and bin/target (the example HTTP target)
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./services/,$(COMMANDS))

deps: ## install what the tests need when missing: redis-server, the emulators' Node packages, zsh, fish and curl, chromium and playwright-core, the Python Azure SDK
	scripts/deps.sh redis emulators shells browser python

test: deps ## go vet and go test every module (TESTFLAGS adds flags)
	@failed=""; \
	for m in $(MODULES); do \
		if [ -z "$$(cd $$m && go list -e ./... 2>/dev/null)" ]; then echo "==> $$m: no Go packages"; continue; fi; \
		echo "==> $$m: go vet"; \
		(cd $$m && go vet ./...) || failed="$$failed $$m(vet)"; \
		echo "==> $$m: go test"; \
		(cd $$m && go test $(TESTFLAGS) -count=1 -timeout=20m ./...) || failed="$$failed $$m(test)"; \
	done; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi

test-race: ## make test with the race detector (needs cgo and a C compiler)
	CGO_ENABLED=1 $(MAKE) test TESTFLAGS='-race'

bench: ## run the Go benchmarks of BENCH_PKGS (figures in docs/benchmarks.md)
	@for entry in $(BENCH_PKGS); do \
		p=$${entry%%:*}; t=$${entry#*:}; \
		echo "==> $$p (-benchtime=$$t)"; \
		(cd $${p%%/*} && go test -run='^$$' -bench=. -benchmem -benchtime="$$t" -timeout=30m ./$${p#*/}/); \
	done

bench-e2e: build deps ## the whole system end to end (processes, HTTP sink): a burst of 100,000, 1,000/s and 5,000/s for 60 s aligned and spread (docs/benchmarks.md)
	cd services && RESCHED_E2E=full go test -count=1 -v -timeout 30m -run '^TestEndToEnd$$' ./e2ebench/

chaos: deps ## the full fault run of docs/reliability.md (about 17 minutes): kills, restarts, an outage of every planner, hung servers and links, Redis splits, a reshard and a repartition, a rolling restart of NATS
	cd services && RESCHED_CHAOS=full go test -count=1 -v -timeout 30m -run '^(TestChaos|TestRedisSentinelMasterHangs|TestPlannerLinkToRedisHangs|TestNATSClusterStreamLeaderLoss|TestNATSClusterRollingRestart|TestWorkerLinkToNATSHangs|TestRedisClusterMasterHangsWithMinReplicas|TestRedisClusterSplit|TestRedisSentinelSplit|TestRedisClusterReshard|TestRepartitionWhileJobsFire|TestPlannerCutOffFromNATSAndRedis|TestAnEnableCutShortByAKillIsFinished)$$' ./chaos/

soak: build deps ## the whole system under a steady load with churn for SOAKTIME (default 30m): nothing lost, nothing growing (docs/reliability.md)
	cd services && RESCHED_SOAK=$(SOAKTIME) go test -count=1 -v -timeout 3h -run '^TestSoak$$' ./e2ebench/

fuzz: ## run every Fuzz target for FUZZTIME (default 30s) each
	@FUZZTIME='$(FUZZTIME)' scripts/fuzz.sh $(MODULES)

run: build ## run the whole system locally: redis, planner with embedded NATS, a worker, the example target and example jobs
	scripts/run.sh

tidy: ## go mod tidy every module
	@for m in $(MODULES); do echo "==> $$m"; (cd $$m && go mod tidy); done

fmt: ## gofmt every Go file
	gofmt -w $(MODULES)

lint: ## fail on unformatted files, then go vet every module
	@unformatted=$$(gofmt -l $(MODULES)); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	@for m in $(MODULES); do \
		if [ -z "$$(cd $$m && go list -e ./... 2>/dev/null)" ]; then continue; fi; \
		echo "==> $$m: go vet"; (cd $$m && go vet ./...); \
	done

clean: ## remove build output
	rm -rf $(BIN)
