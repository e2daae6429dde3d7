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
PY_DIR := clients/python
PY_VENV := target/py-venv
PYTHON := $(CURDIR)/$(PY_VENV)/bin/python

.PHONY: help deps build run test lint fmt bench chaos fuzz valgrind clean python-venv test-python lint-python bench-python

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
	@rc=0; $(MAKE) --no-print-directory test-python || rc=$$?; \
	py=$$($(PYTHON) $(PY_DIR)/tests/junit_counts.py target/python-junit.xml 2>/dev/null || echo "0 1"); \
	awk -v pp="$${py% *}" -v pf="$${py#* }" '/^test result:/ {p += $$4; f += $$6} \
		END {printf "%d passed, %d failed\n", p + pp, f + pf}' target/test.log; \
	exit $$rc

lint: ## rustfmt and clippy, ruff and mypy --strict (Python client)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(MAKE) --no-print-directory lint-python

fmt:
	$(CARGO) fmt --all

bench: build ## benchmarks: native vs Lua vs plain Redis, WAIT vs pub/sub vs polling
	$(CARGO) run --release --manifest-path bench/Cargo.toml -- --module $(CURDIR)/$(MODULE) --out bench-results
	$(MAKE) --no-print-directory bench-python

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

python-venv: ## virtualenv target/py-venv with the Python client (clients/python) and its test/lint tools
	@python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || { \
		echo "installing python3-venv"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null; }
	@test -x $(PYTHON) || python3 -m venv $(PY_VENV)
	@test $(PY_VENV)/.deps -nt $(PY_DIR)/pyproject.toml || { \
		$(PYTHON) -m pip install -q --disable-pip-version-check '$(PY_DIR)[test,lint]' && touch $(PY_VENV)/.deps; }
	@# the client itself, fresh from the working tree (not editable: tests see the installed package)
	$(PYTHON) -m pip install -q --disable-pip-version-check --no-deps --force-reinstall ./$(PY_DIR)

test-python: build python-venv ## Python client tests against real redis-server processes, module from make build
	@rm -f target/python-junit.xml
	cd $(PY_DIR) && LOCK_MODULE=$(CURDIR)/$(MODULE) $(PYTHON) -m pytest tests -q -p no:cacheprovider \
		--junitxml=$(CURDIR)/target/python-junit.xml

lint-python: python-venv ## ruff and mypy --strict on the Python client
	cd $(PY_DIR) && $(PYTHON) -m ruff check src tests bench && $(PYTHON) -m ruff format --check src tests bench \
		&& $(PYTHON) -m mypy --strict src

bench-python: build python-venv ## Python client: N processes on one lock (module / lua / redis-py Lock), call overhead
	@mkdir -p bench-results
	$(PYTHON) $(PY_DIR)/bench/contention.py --module $(CURDIR)/$(MODULE) --out bench-results/python.md

clean:
	$(CARGO) clean
