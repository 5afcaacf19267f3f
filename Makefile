# hookdedup: `make run` serves on the defaults, `make test` runs every test (installing
# what a fresh machine lacks), `make bench` measures. README.md's shell examples are a
# test too (cmd/hookdedup/readme_test.go, in `go test ./...`): it runs them with bash,
# curl and openssl against the built binary, as a reader would type them after `make run`.
SHELL   := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/hookdedup
export CGO_ENABLED := 1
# Two SQLite compile options, which a #cgo line cannot give another package's C code
# (go-sqlite3's), come from here, on top of what `go env` says; `go build` run by hand
# leaves them out, and serve then works the same, only slower where they matter:
# - SQLITE_MAX_MMAP_SIZE (64-bit platforms, where a map of a file past 4 GiB fits):
#   SQLite maps at most this much of the database file (mmap_size asks up to it);
#   go-sqlite3's build stops just under 2 GiB, a file of about 1.3 M deliveries. Past
#   the map, every page a reader needs is a system call and a copy: a console filter
#   that looks at each row read its window cold in 142-158 ms at 5 M deliveries, 5-17
#   ms through the map.
# - HAVE_FDATASYNC (Linux, as SQLite's own Linux builds do): SQLite syncs its files with
#   fdatasync, not fsync. On Linux fdatasync writes the data and the metadata needed to
#   read it back, the file's size included, and skips only timestamps, so a commit is as
#   durable and its sync shorter.
ifneq ($(filter amd64 arm64 loong64 mips64 mips64le ppc64 ppc64le riscv64 s390x,$(shell go env GOARCH)),)
SQLITE_CFLAGS := -DSQLITE_MAX_MMAP_SIZE=0x10000000000
endif
ifeq ($(shell go env GOOS),linux)
SQLITE_CFLAGS += -DHAVE_FDATASYNC=1
endif
export CGO_CFLAGS := $(filter-out $(SQLITE_CFLAGS),$(shell go env CGO_CFLAGS)) $(SQLITE_CFLAGS)

.PHONY: all build run test test-short generate check-generated lint unit e2e deps browser-deps bench crash-test clean release release-check

all: build

build: generate
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/hookdedup

run: build
	./$(BIN) serve

generate:
	go tool templ generate -path views

# Generated templ files are committed: fail when they are stale.
check-generated:
	@out=$$(go tool templ generate -path views 2>&1) || { echo "$$out"; exit 1; }; \
		if echo "$$out" | grep -q '^(!)'; then echo "$$out" | grep '^(!)'; \
		echo "templ warns about views/*.templ (a warned @call renders as text): fix the templates"; exit 1; fi
	@if [ -n "$$(git status --porcelain -- views)" ]; then \
		echo "views/*_templ.go are stale: run 'make generate' and commit"; git status --porcelain -- views; exit 1; fi

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
		if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

# Browser tests: Debian's Chromium driven by Playwright's driver of the version that
# playwright-go (go.mod) was built for, from the npm registry. Nothing is downloaded at
# test time.
PLAYWRIGHT_VERSION ?= 1.64.1
PLAYWRIGHT_DRIVER  ?= $(HOME)/.cache/hookdedup/playwright-driver-$(PLAYWRIGHT_VERSION)
CHROMIUM           ?= /usr/bin/chromium

# What `make test` needs that a fresh machine may lack (idempotent; apt-get and npm only
# when something is missing).
deps:
	go mod download
	@if [ ! -x $(CHROMIUM) ]; then \
		echo "installing chromium"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; fi
	@if ! command -v systemd-analyze >/dev/null; then \
		echo "installing systemd (systemd-analyze verify checks the generated units)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y systemd; fi
	@if ! command -v pebble >/dev/null; then \
		echo "installing pebble (Let's Encrypt's test ACME server, for the HTTPS tests)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y pebble; fi
	@if ! /usr/bin/python3 -c 'import aiosmtpd' 2>/dev/null; then \
		echo "installing python3-aiosmtpd (a real SMTP server for the email alert tests)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-aiosmtpd; fi
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then \
		echo "installing postgresql (the tests start throwaway clusters of their own: no system cluster is created or started)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-common && \
		pg_conftool /etc/postgresql-common/createcluster.conf set create_main_cluster false && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; fi
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "installing nodejs and npm"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; fi
	@if [ ! -f $(PLAYWRIGHT_DRIVER)/package/cli.js ]; then \
		echo "fetching playwright-core@$(PLAYWRIGHT_VERSION) into $(PLAYWRIGHT_DRIVER)"; \
		rm -rf $(PLAYWRIGHT_DRIVER).tmp && mkdir -p $(PLAYWRIGHT_DRIVER).tmp && cd $(PLAYWRIGHT_DRIVER).tmp && \
		npm pack --silent playwright-core@$(PLAYWRIGHT_VERSION) >/dev/null && \
		tar xzf playwright-core-$(PLAYWRIGHT_VERSION).tgz && rm playwright-core-$(PLAYWRIGHT_VERSION).tgz && \
		rm -rf $(PLAYWRIGHT_DRIVER) && mv $(PLAYWRIGHT_DRIVER).tmp $(PLAYWRIGHT_DRIVER); fi

# Browser tests: log in, audit a duplicate, release a stuck key, in a real Chromium.
# Screenshots land in testoutput/screenshots/.
e2e:
	PLAYWRIGHT_DRIVER_PATH=$(PLAYWRIGHT_DRIVER) PLAYWRIGHT_NODEJS_PATH="$$(command -v node)" CHROMIUM=$(CHROMIUM) \
		go test -tags e2e -count=1 -run Browser ./cmd/hookdedup/

# go test stops a package at 10 minutes by default: on a machine shared with other work
# the largest packages (cmd/hookdedup, storage/postgres) under -race come close to it.
unit:
	go test -race -count=1 -timeout 30m ./...

test: deps check-generated lint unit fuzz e2e

# `make test-short`: the inner loop while editing, without -race. The long fault and
# crash tests (a held database lock, a hanging downstream, SIGKILLs) and the
# measurements skip themselves with -short; `make test` runs them.
test-short:
	go test -short ./...

# `make bench`: the Go benchmarks of the hot path (derive, verify, the whole handler in
# process, the group-committed claim) and of a key's page with 20,000 deliveries, then the
# load run (cmd/hookdedup/load_test.go): serve against a bare net/http handler, the intake
# handler with nothing stored and a claims-only group-commit SQLite store (the yardstick
# of CPU per delivery) under wrk, empty and with millions of keys stored, serve on an
# empty PostgreSQL database (one replica, and three sharing the load) beside SQLite, and
# the console's answer times at 5 M keys; it ends with one table and its performance
# targets, each marked met or MISSED. About 15 minutes on 2 cores. Knobs (environment
# or make variables), e.g.
#   make bench BENCH_KEYS=1000000 BENCH_RUNS=1 BENCH_DURATION=5s
# BENCH_KEYS (default 1000000,5000000), BENCH_SWEEP_KEYS (1000000), BENCH_SYNC (FULL,NORMAL),
# BENCH_DURATION (10s), BENCH_RUNS (3), BENCH_CONNS (64), BENCH_THREADS (2), BENCH_DIR,
# BENCH_OUT (also write the summary table there), BENCH_REFERENCE=0 (skip the FastAPI
# reference), BENCH_POSTGRES=0 (skip PostgreSQL), BENCH_PG_REPLICAS (1,3: PostgreSQL's
# numbers of replicas), BENCH_BASELINE (another hookdedup binary, run beside this one on the empty
# database: before and after a change); BENCH_TIME is -benchtime (1s), BENCH_LOAD=0
# skips the load run. A load run of a minute or so, without stored keys or the sweep
# (CGO_CFLAGS as make sets it, so that serve maps and flushes its file as make builds it,
# and so should a BENCH_BASELINE binary's build):
#   CGO_CFLAGS="$(go env CGO_CFLAGS) -DSQLITE_MAX_MMAP_SIZE=0x10000000000 -DHAVE_FDATASYNC=1" BENCH_KEYS=0 BENCH_RUNS=1 BENCH_DURATION=5s BENCH_SWEEP_KEYS=0 go test -tags load -run '^TestLoad$' -v ./cmd/hookdedup/
export BENCH_KEYS BENCH_SWEEP_KEYS BENCH_SYNC BENCH_DURATION BENCH_RUNS BENCH_CONNS BENCH_THREADS BENCH_DIR BENCH_OUT BENCH_REFERENCE BENCH_POSTGRES BENCH_PG_REPLICAS BENCH_BASELINE
BENCH_TIME ?= 1s
BENCH_LOAD ?= 1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: bench-deps
bench-deps:
	@command -v wrk >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wrk; }
	@/usr/bin/python3 -c 'import fastapi, uvicorn' 2>/dev/null || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-fastapi uvicorn; }

bench: bench-deps
	go test -run '^$$' -bench '^Benchmark(Derive|Verify_StandardWebhooks(Parallel)?|Intake|Record|Console|SweepExpired)' \
		-benchtime $(BENCH_TIME) -benchmem ./receiver/ ./receiver/signature/ ./storage/sqlite/ ./storage/postgres/ ./web/
	@if [ "$(BENCH_LOAD)" != 0 ]; then \
		go test -tags load -run '^TestLoad(ConsolePostgres)?$$' -count=1 -v -timeout 60m ./cmd/hookdedup/ | grep --line-buffered -v '^=== RUN'; \
		exit $${PIPESTATUS[0]}; fi

# `make crash-test`: the long crash test. SIGKILLs serve CRASH_KILLS times at random
# moments under concurrent signed traffic with duplicates, restarts it each time, then
# checks every answer against the database and the downstream and prints the figures.
# `make test` runs a short form (4 kills) through `go test`.
CRASH_KILLS ?= 25
crash-test:
	HOOKDEDUP_CRASH_KILLS=$(CRASH_KILLS) go test -count=1 -run '^TestCrash_' -v -timeout 30m ./cmd/hookdedup/ | grep -v '^=== RUN'; \
		exit $${PIPESTATUS[0]}

# `make fuzz`: every fuzz target briefly (FUZZ_TIME each, a few seconds), from its
# committed seed corpus (testdata/fuzz/). A failure leaves the input that broke it in
# testdata/fuzz/. Budgets are counts, not durations: Go 1.26's -fuzztime deadline can
# fail a target with a bare "context deadline exceeded" on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_TIME ?= 20000x
.PHONY: fuzz
fuzz:
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$dir $$target"; \
			go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime 200x $$dir || exit 1; \
		done; done

# `make release`: static Linux binaries for amd64 and arm64 in dist/, with SHA256SUMS,
# version stamped. cgo (SQLite) links glibc statically: netgo and osusergo keep Go's own
# DNS resolver and user lookup, so that no getaddrinfo or getpwnam from glibc is linked
# (a static glibc would need the very shared libraries it was meant to do without), and
# sqlite_omit_load_extension drops SQLite's dlopen. arm64 is cross-compiled with Debian's
# gcc-aarch64-linux-gnu, installed when missing.
RELEASE_TAGS    := osusergo netgo sqlite_omit_load_extension
RELEASE_LDFLAGS  = -s -w -linkmode external -extldflags "-static" -X main.version=$(VERSION)
RELEASE_ARCHS   := amd64 arm64
CC_amd64        := gcc
CC_arm64        := aarch64-linux-gnu-gcc

release:
	@if ! command -v $(CC_arm64) >/dev/null; then \
		echo "installing gcc-aarch64-linux-gnu"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc-aarch64-linux-gnu; fi
	rm -rf dist && mkdir -p dist
	@for arch in $(RELEASE_ARCHS); do \
		cc=$(CC_amd64); [ $$arch = arm64 ] && cc=$(CC_arm64); \
		echo "building dist/hookdedup-linux-$$arch ($(VERSION))"; \
		GOOS=linux GOARCH=$$arch CC=$$cc go build -trimpath -tags '$(RELEASE_TAGS)' \
			-ldflags '$(RELEASE_LDFLAGS)' -o dist/hookdedup-linux-$$arch ./cmd/hookdedup || exit 1; \
	done
	cd dist && sha256sum hookdedup-linux-* > SHA256SUMS
	@$(MAKE) --no-print-directory release-check VERSION=$(VERSION)

# The release's binaries are static and say their version; fails otherwise.
release-check:
	@out="$$(ldd dist/hookdedup-linux-amd64 2>&1)"; \
		if ! grep -q 'not a dynamic executable' <<<"$$out"; then \
		echo "dist/hookdedup-linux-amd64 is dynamically linked:"; echo "$$out"; exit 1; fi
	@got="$$(dist/hookdedup-linux-amd64 version)"; \
		if [ "$$got" != "hookdedup $(VERSION)" ]; then \
		echo "dist/hookdedup-linux-amd64 version says '$$got', want 'hookdedup $(VERSION)'"; exit 1; fi
	@info="$$(file -b dist/hookdedup-linux-arm64)"; \
		if ! grep -q 'ARM aarch64' <<<"$$info" || ! grep -q 'statically linked' <<<"$$info"; then \
		echo "dist/hookdedup-linux-arm64 is not a static arm64 executable: $$info"; exit 1; fi
	@if command -v qemu-aarch64 >/dev/null || command -v qemu-aarch64-static >/dev/null; then \
		qemu=$$(command -v qemu-aarch64 || command -v qemu-aarch64-static); \
		got="$$($$qemu dist/hookdedup-linux-arm64 version)"; \
		if [ "$$got" != "hookdedup $(VERSION)" ]; then \
		echo "dist/hookdedup-linux-arm64 version (under qemu) says '$$got'"; exit 1; fi; fi
	cd dist && sha256sum --check --quiet SHA256SUMS
	@ls -l dist

clean:
	rm -rf bin testoutput dist
