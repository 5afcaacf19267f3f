# hookdedup: `make run` serves on the defaults, `make test` runs every test (installing
# what a fresh machine lacks), `make bench` measures.
SHELL   := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/hookdedup
export CGO_ENABLED := 1

.PHONY: all build run test generate check-generated lint unit e2e deps browser-deps bench crash-test clean

all: build

build: generate
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/hookdedup

run: build
	./$(BIN) serve

generate:
	go tool templ generate -path views

# Generated templ files are committed: fail when they are stale.
check-generated:
	@go tool templ generate -path views >/dev/null
	@if [ -n "$$(git status --porcelain -- views)" ]; then \
		echo "views/*_templ.go are stale: run 'make generate' and commit"; git status --porcelain -- views; exit 1; fi

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
		if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

# What `make test` needs that a fresh machine may lack.
deps:
	go mod download

# Browser tests (issue: console) join here.
e2e:
	@true

unit:
	go test -race -count=1 ./...

test: deps check-generated lint unit e2e

bench:
	go test -run '^$$' -bench . -benchmem ./receiver/ ./storage/

clean:
	rm -rf bin testoutput
