# redis-lock: build, run and test the Redis lock module.
# `make run` and `make test` install what is missing on a fresh Debian machine.

PORT ?= 6379
CARGO ?= cargo
MODULE := target/release/libredis_lock.so
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := redis-server redis-tools libclang-dev build-essential pkg-config

.PHONY: help deps build run test unit lint fmt bench fuzz valgrind clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

deps: ## install redis-server and libclang (bindgen) when missing
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing build-essential"; \
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

test: deps ## every test: unit, property and integration (real redis-server processes)
	$(CARGO) test --all-targets
	$(CARGO) test --doc

lint: ## rustfmt and clippy
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: build ## benchmarks: native vs Lua vs plain Redis, WAIT vs pub/sub vs polling
	$(CARGO) run --release --manifest-path bench/Cargo.toml -- --module $(CURDIR)/$(MODULE) --out bench-results

clean:
	$(CARGO) clean
