#!/usr/bin/env bash
# Run the Rust integration suite once per server: `scripts/test_matrix.sh DIR...`, where each DIR
# holds a `redis-server` (Redis or Valkey) that goes first on PATH for its run. Prints which
# server each run used, a summary line per server, and exits non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 DIR..." >&2; exit 2; }
cargo build --tests >/dev/null 2>&1 || cargo build --tests || exit 1
mkdir -p target
status=0
summary=()
for dir in "$@"; do
	dir=$(cd "$dir" && pwd) || { status=1; continue; }
	name=$(basename "$dir")
	version=$(PATH="$dir:$PATH" redis-server --version 2>/dev/null | head -1)
	echo "=== $name: $version"
	log="target/matrix-$name.log"
	start=$(date +%s)
	if PATH="$dir:$PATH" cargo test --no-fail-fast --tests 2>&1 | tee "$log" | grep -E "^test result|FAILED|panicked"; then :; fi
	result=${PIPESTATUS[0]}
	counts=$(awk '/^test result:/ {p += $4; f += $6} END {printf "%d passed, %d failed", p, f}' "$log")
	took=$(( $(date +%s) - start ))
	if [ "$result" -eq 0 ]; then line="ok     $name: $counts (${took} s)"; else line="FAILED $name: $counts (${took} s)"; status=1; fi
	summary+=("$line")
done
echo "=== server matrix"
printf '%s\n' "${summary[@]}"
exit $status
