GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BENCH   ?= .
PKGS    ?= ./...

.PHONY: build test bench benchmarks run chaos chaos-short

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

# A static binary, as the FROM scratch images need.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/kcoord ./cmd/kcoord

test:
	$(GO) test -race ./... -count=1 -timeout 15m

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

# docs/benchmarks.md, measured on this machine: kcoord beside kfake in one
# run (kcoord bench report; a few minutes). BENCH_DIR is where the nodes
# keep their data: the disk a deployment would use.
BENCH_DIR ?= $(CURDIR)
benchmarks: build
	bin/kcoord bench report --dir $(BENCH_DIR) > docs/benchmarks.md.tmp || { rm -f docs/benchmarks.md.tmp; exit 1; }
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
