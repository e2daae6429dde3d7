# redis-lock: build, run and test the Redis lock module.
# `make run` and `make test` install what is missing on a fresh Debian machine.

PORT ?= 6379
FUZZ_SECONDS ?= 60
SAFETY_SECONDS ?= 6
SAFETY_RUNS ?= 3
SAFETY_SEED ?= 1
TEST_FUZZ_SECONDS ?= 10
FUZZ_TARGETS := args state queue fence script_match timers grant rw_grant sem fair
CARGO ?= cargo
MODULE := target/release/libredis_lock.so
SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

CHAOS = $(CARGO) run --release --manifest-path bench/Cargo.toml --bin chaos -- --module $(CURDIR)/$(MODULE)

PY_VENV := target/py-venv
PY := $(CURDIR)/$(PY_VENV)/bin
# The oldest redis-py the client supports (pyproject: redis>=5.0): its suite runs on this too.
PY_OLD_REDIS := 5.0.8
PY_OLD := $(CURDIR)/target/py-venv-old/bin

.PHONY: help deps build run test test-matrix audit profile lint fmt bench bench-matrix chaos safety safety-docs test-safety fuzz valgrind clean python-venv test-python lint-python bench-python

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

test: deps ## a short fuzz run, then every test: Rust unit and integration (module, bench, testkit), the Python client's suite (newest and oldest redis-py), the safety harness self-test
	$(MAKE) fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)
	@mkdir -p target
	@rm -f target/test.log target/pytest.xml target/pytest-old.xml target/pytest-safety.xml
	@status=0; \
	set -o pipefail; $(CARGO) test --all-targets 2>&1 | tee target/test.log || status=1; \
	$(CARGO) test --manifest-path bench/Cargo.toml 2>&1 | tee -a target/test.log || status=1; \
	$(CARGO) test --manifest-path testkit/Cargo.toml --target-dir target/testkit 2>&1 | tee -a target/test.log || status=1; \
	$(MAKE) --no-print-directory test-python || status=1; \
	$(MAKE) --no-print-directory test-safety || status=1; \
	python3 scripts/test_summary.py target/test.log target/pytest.xml target/pytest-safety.xml; \
	exit $$status

test-matrix: deps ## the Rust integration suite once per server: make test-matrix SERVERS="dir ..." (each dir holds a redis-server)
	@test -n "$(SERVERS)" || { echo 'usage: make test-matrix SERVERS="dir ..."'; exit 2; }
	bash scripts/test_matrix.sh $(SERVERS)

AUDIT_SERVERS ?= $(wildcard ../shared/servers/*/)
audit: deps ## the security tests (ACL, write refusals, stalls, limits, reload) on the system server and each AUDIT_SERVERS dir
	@status=0; for dir in "" $(AUDIT_SERVERS); do \
		echo "=== $${dir:-system}: $$(PATH="$$dir:$$PATH" redis-server --version | head -1)"; \
		PATH="$$dir:$$PATH" $(CARGO) test --test security_acl --test security_writes --test security_limits \
			--test security_calls --test security_pause --test acl_categories --test fence 2>&1 | grep -E '^test result|FAILED|panicked' || true; \
		test $${PIPESTATUS[0]} -eq 0 || status=1; \
	done; exit $$status

python-venv: ## the Python client's virtualenvs: target/py-venv (newest redis-py, test and lint tools) and target/py-venv-old (redis-py $(PY_OLD_REDIS))
	@test -x $(PY)/python || python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || { \
		echo "installing python3-venv"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null; }
	@test -x $(PY)/python || python3 -m venv $(PY_VENV)
	@$(PY)/pip install -q --upgrade pip >/dev/null 2>&1 || true
	$(PY)/pip install -q --upgrade -e './clients/python[test,lint]' redis
	@test -x $(PY_OLD)/python || python3 -m venv target/py-venv-old
	$(PY_OLD)/pip install -q -e './clients/python[test]' 'redis==$(PY_OLD_REDIS)'

test-python: deps python-venv ## the Python client's tests against real redis-server processes (module and Lua modes), on the newest redis-py and on the oldest supported
	$(CARGO) build
	@mkdir -p target
	@rm -f target/pytest.xml target/pytest-old.xml
	@status=0; \
	echo "== redis-py $$($(PY)/python -c 'import redis; print(redis.__version__)')"; \
	(cd clients/python && LOCK_MODULE=$(CURDIR)/target/debug/libredis_lock.so $(PY)/pytest -q -p no:cacheprovider --junitxml=$(CURDIR)/target/pytest.xml) || status=1; \
	echo "== redis-py $$($(PY_OLD)/python -c 'import redis; print(redis.__version__)')"; \
	(cd clients/python && LOCK_MODULE=$(CURDIR)/target/debug/libredis_lock.so $(PY_OLD)/pytest -q -p no:cacheprovider --junitxml=$(CURDIR)/target/pytest-old.xml) || status=1; \
	exit $$status

lint: lint-python ## rustfmt, clippy, and ruff + mypy (strict) on the Python client
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	cd bench && $(CARGO) fmt -- --check && $(CARGO) clippy --all-targets -- -D warnings
	cd testkit && $(CARGO) fmt -- --check && $(CARGO) clippy --all-targets --target-dir ../target/testkit -- -D warnings

lint-python: python-venv
	cd clients/python && $(PY)/ruff check src tests bench && $(PY)/ruff format --check src tests bench && $(PY)/mypy
	cd safety && $(PY)/ruff check . && $(PY)/ruff format --check . && $(PY)/mypy

fmt:
	$(CARGO) fmt --all

bench: build ## benchmarks: native vs Lua vs plain Redis, WAIT vs pub/sub vs polling, Redisson scripts (also per server and enable-debug-command: bench-matrix), Python client
	$(CARGO) run --release --manifest-path bench/Cargo.toml --bin lock-bench -- --module $(CURDIR)/$(MODULE) --out bench-results
	$(MAKE) --no-print-directory bench-matrix
	$(MAKE) --no-print-directory bench-python

BENCH_SERVERS ?= $(wildcard ../shared/servers/*/)
bench-matrix: build ## Redisson's scripts native vs Lua (enable-debug-command no and local) and LOCK.* READ/WRITE vs Lua, on the system server and each BENCH_SERVERS dir; bench-results/matrix/summary.md
	bash scripts/bench_matrix.sh $(CURDIR)/$(MODULE) bench-results/matrix $(BENCH_SERVERS)

bench-python: build python-venv ## the Python client: contention (N processes) and per-call overhead, side by side with redis-py's Lock, python-redis-lock and pottery
	$(PY)/pip install -q -e './clients/python[bench]'
	LOCK_MODULE=$(CURDIR)/$(MODULE) $(PY)/python clients/python/bench/contention.py --out bench-results/python.md

chaos: build ## fenced critical sections through repeated failovers that lose writes: FENCE vs a plain counter
	$(CHAOS) --out bench-results $(CHAOS_ARGS)

safety: build python-venv ## every lock strategy under every fault, checked histories, a known-broken control per cell (SAFETY_RUNS runs of SAFETY_SECONDS, SAFETY_SEED), then make chaos; target/safety/
	@mkdir -p target/safety && rm -f target/safety/results.json target/safety/results.md target/safety/safety.svg
	@status=0; \
	LOCK_MODULE=$(CURDIR)/$(MODULE) $(PY)/python safety/run.py --seconds $(SAFETY_SECONDS) --runs $(SAFETY_RUNS) \
		--seed $(SAFETY_SEED) --out target/safety || status=$$?; \
	test -f target/safety/results.json || exit 1; \
	$(CHAOS) --out target/safety $(CHAOS_ARGS) || status=1; \
	exit $$status

safety-docs: python-venv ## regenerate the README's and docs/safety.md's safety tables from target/safety/results.json
	$(PY)/python safety/report.py target/safety/results.json --out target/safety --update-docs --root $(CURDIR)

test-safety: build python-venv ## the safety harness's self-test: the checker on planted histories, every injector bites (and a disabled one is caught), the report
	@mkdir -p target
	cd safety && LOCK_MODULE=$(CURDIR)/$(MODULE) $(PY)/pytest -q -p no:cacheprovider --junitxml=$(CURDIR)/target/pytest-safety.xml

profile: build ## callgrind instructions per command: LOCK.* vs SET PX vs the Lua script (SERVER=path/to/redis-server)
	python3 scripts/profile.py --module $(CURDIR)/$(MODULE) --server $(or $(SERVER),redis-server) $(if $(SERVER),--scope process)

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
