# redis-lock: build, run and test the Redis lock module.
# `make run` and `make test` install what is missing on a fresh Debian machine.

PORT ?= 6379
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 10
FUZZ_TARGETS := args state queue fence script_match
CARGO ?= cargo
MODULE := target/release/libredis_lock.so
SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help deps build run test lint fmt bench chaos fuzz valgrind clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

deps: ## install redis-server and libclang (bindgen) when missing
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	{ command -v cc && command -v c++ && command -v make; } >/dev/null 2>&1 || missing="$$missing build-essential"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi; \
	redis-server --version

build: deps ## build target/release/libredis_lock.so
	$(CARGO) build --release

run: build ## start redis-server on 127.0.0.1:$(PORT) with the module (Ctrl-C stops it)
	redis-server redis.conf.example --port $(PORT) --loadmodule $(CURDIR)/$(MODULE)

test: deps ## a short fuzz run, then every test: unit and integration (real redis-server processes)
	$(MAKE) fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)
	@mkdir -p target
	set -o pipefail; $(CARGO) test --all-targets 2>&1 | tee target/test.log
	@awk '/^test result:/ {p += $$4; f += $$6} END {printf "%d passed, %d failed\n", p, f}' target/test.log

lint: ## rustfmt and clippy
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: build ## benchmarks: native vs Lua vs plain Redis, WAIT vs pub/sub vs polling
	$(CARGO) run --release --manifest-path bench/Cargo.toml -- --module $(CURDIR)/$(MODULE) --out bench-results

chaos: build ## fenced critical sections through repeated failovers that lose writes: FENCE vs a plain counter
	$(CARGO) run --release --manifest-path bench/Cargo.toml --bin chaos -- --module $(CURDIR)/$(MODULE) --out bench-results $(CHAOS_ARGS)

fuzz: ## coverage-guided fuzzing of parsing, state transitions and the waiter queue (FUZZ_SECONDS each)
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install --locked cargo-fuzz
	@# cargo-fuzz needs nightly -Z flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
	cd fuzz && for t in $(FUZZ_TARGETS); do \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 2>&1 \
			| grep -E '^(stat::number_of_executed_units|Done|==|SUMMARY|INFO: (seed|Loaded))' ; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

valgrind: build ## run a representative workload under valgrind memcheck and report module errors/leaks
	bash scripts/valgrind.sh

clean:
	$(CARGO) clean
