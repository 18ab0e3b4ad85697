GO      ?= go
# The commit kcoord version prints beside the release (release.Version, in
# release/release.go): 12 hex digits, -dirty for uncommitted changes.
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BENCH   ?= .
PKGS    ?= ./...

.PHONY: build test bench benchmarks run chaos chaos-short upgrade-test bin/kcoord-previous

# The chaos suite (needs root: network namespaces and iptables inside
# them): a three-node cluster of bin/kcoord under the verify workload,
# every nemesis twice, at most 10 minutes on two cores. The last line is
# "chaos: N ops, F faults, A anomalies"; it exits 1 on any anomaly and keeps
# the histories in the folder it names. The long run of docs/reliability.md:
#   make chaos CHAOS_FLAGS="--cycles 30 --baseline 60s --bound 30m --out chaos-long"
CHAOS_FLAGS ?= --cycles 2 --baseline 30s --bound 9m
chaos: build
	bin/kcoord chaos $(CHAOS_FLAGS)

# One cycle, for CI (at most 7 minutes).
chaos-short: build
	bin/kcoord chaos --cycles 1 --baseline 15s --bound 6m

# The mixed-version test (needs root, as chaos does): three nodes of the
# previous release, built from the commit release/previous-commit names,
# upgraded one at a time to bin/kcoord under the chaos workload, with
# rollbacks, a finalization by hand and a too-old node that must refuse
# to start (at most 4 minutes); then the compose cluster's rolling upgrade
# of docs/upgrading.md (TestDockerRollingUpgrade, a minute; skipped
# without Docker). The process run's last line is "upgrade: N ops, S
# steps, A anomalies"; it exits 1 on any anomaly and keeps the histories
# and node logs in the folder it names. UPGRADE_FLAGS=--plant starts the new
# nodes with a planted incompatibility, which the run must catch.
PREVIOUS_COMMIT := $(shell sed -n '/^[^\#]/{p;q;}' release/previous-commit)
UPGRADE_FLAGS ?=
upgrade-test: build bin/kcoord-previous
	bin/kcoord chaos upgrade --from bin/kcoord-previous $(UPGRADE_FLAGS)
	KCOORD_PREVIOUS_BINARY=$(CURDIR)/bin/kcoord-previous $(GO) test ./e2e/ -run '^TestDockerRollingUpgrade$$' -count=1 -timeout 8m

# The previous release's binary, from a git archive of its commit, rebuilt
# only when the stamp beside it names another commit (phony: the stamp,
# not the file's age, decides).
bin/kcoord-previous:
	@if [ -x $@ ] && [ "$$(cat $@.commit 2>/dev/null)" = "$(PREVIOUS_COMMIT)" ]; then \
		exit 0; \
	fi; \
	git cat-file -e "$(PREVIOUS_COMMIT)^{commit}" 2>/dev/null || { \
		echo "the previous release's commit $(PREVIOUS_COMMIT) is not in this clone (a shallow one? git fetch --unshallow)" >&2; exit 1; }; \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	git archive "$(PREVIOUS_COMMIT)" | tar -x -C "$$tmp" && \
	mkdir -p bin && \
	(cd "$$tmp" && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(PREVIOUS_COMMIT)" -o "$(CURDIR)/$@.tmp" ./cmd/kcoord) && \
	mv $@.tmp $@ && echo "$(PREVIOUS_COMMIT)" > $@.commit

# A static binary, as the FROM scratch images need.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X github.com/kcoord/kcoord/release.commit=$(COMMIT)" -o bin/kcoord ./cmd/kcoord

# The benchmark report's and shard study's end-to-end runs skip under
# -race (they would starve the packages tested beside them) and run
# after, on their own, without it.
test:
	$(GO) test -race ./... -count=1 -timeout 15m
	$(GO) test ./bench -count=1 -timeout 15m -run 'TestReportMeasuresEveryServer|TestShardsMeasuresEveryStepOfAConfiguration|TestLoadMeasuresEveryStep'

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

# docs/benchmarks.md, measured on this machine: kcoord beside kfake in one
# run (kcoord bench report; a few minutes), then the section "How many
# Raft groups" (kcoord bench shards: 8, 16 and 50 shards on 3 and 5 nodes;
# about 15 minutes), then the sections "Scale" (kcoord bench load: three
# processes filled with 100 k and with 1 M groups of 10 partitions; about
# 20 minutes). BENCH_DIR is where the nodes keep their data: the disk a
# deployment would use. Any failing leaves docs/benchmarks.md as it was.
BENCH_DIR ?= $(CURDIR)
LOAD_GROUPS ?= 100000,1000000
benchmarks: build
	{ bin/kcoord bench report --dir $(BENCH_DIR) && echo && bin/kcoord bench shards --dir $(BENCH_DIR) && echo && bin/kcoord bench load --dir $(BENCH_DIR) --groups $(LOAD_GROUPS); } > docs/benchmarks.md.tmp || { rm -f docs/benchmarks.md.tmp; exit 1; }
	mv docs/benchmarks.md.tmp docs/benchmarks.md

run:
	$(GO) run ./cmd/kcoord serve

# Containers: a FROM scratch image holding bin/kcoord, and a three-node
# cluster from docker-compose.yml (Kafka on 127.0.0.1:19092/19192/19292).
DOCKER  ?= docker
COMPOSE ?= docker-compose
IMAGE   ?= kcoord:dev

.PHONY: image cluster-up cluster-down test-docker

image: build
	$(DOCKER) build -t $(IMAGE) .

cluster-up: image
	KCOORD_IMAGE=$(IMAGE) $(COMPOSE) up -d

cluster-down:
	KCOORD_IMAGE=$(IMAGE) $(COMPOSE) down -v

test-docker:
	$(GO) test ./e2e/ -run '^TestDockerCluster$$' -count=1 -v -timeout 12m

# The same cluster secured, from docker-compose.secure.yml: TLS and SASL
# (bootstrap superuser admin) on Kafka, gossip encryption, Raft mutual TLS.
# Its own compose project beside the plain one, Kafka on
# 127.0.0.1:29092/29192/29292. `make certs` writes the CA, the nodes'
# certificates, gossip.key and superuser.password into certs/ once (kept
# while certs/ca.pem exists; rm -r certs for new ones).
SECURE_PROJECT ?= kcoord-secure
SECURE_COMPOSE  = KCOORD_IMAGE=$(IMAGE) $(COMPOSE) -p $(SECURE_PROJECT) -f docker-compose.secure.yml

.PHONY: certs cluster-up-secure cluster-down-secure test-docker-secure

certs: build
	test -f certs/ca.pem || bin/kcoord certs --dir certs --hosts kcoord1,kcoord2,kcoord3 --clients app

cluster-up-secure: image certs
	$(SECURE_COMPOSE) up -d

cluster-down-secure:
	$(SECURE_COMPOSE) down -v

test-docker-secure:
	$(GO) test ./e2e/ -run '^TestDockerSecureCluster$$' -count=1 -v -timeout 12m
