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
