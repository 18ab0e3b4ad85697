GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BENCH   ?= .
PKGS    ?= ./...

.PHONY: build test bench run

# A static binary, as the FROM scratch images need.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/kcoord ./cmd/kcoord

test:
	$(GO) test -race ./... -count=1 -timeout 15m

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

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
