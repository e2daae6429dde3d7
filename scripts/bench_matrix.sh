#!/usr/bin/env bash
# Redisson's scripts natively vs in Lua on every server, with `enable-debug-command` off and
# `local` (on Redis 8.2 a module asking RM_GetContextFlags with `local` pays ~1 800 instructions
# a call), the read-write lock's LOCK.* commands vs Lua, the semaphore's and the rest of the
# family's scripts (fair lock, count-down latch, spin and non-reentrant locks) natively vs in Lua
# on every server: `scripts/bench_matrix.sh MODULE OUT DIR...`. DIR "" is the system's redis-server; each
# other DIR holds a `redis-server` that goes first on PATH. Writes OUT/<server>-<config>/results.json
# and OUT/summary.md (throughput and server µs ratios per server, config and script).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 MODULE OUT [DIR...]" >&2; exit 2; }
module=$1 out=$2
shift 2
dirs=("" "$@")
status=0
cargo build -q --release --manifest-path bench/Cargo.toml --bin lock-bench || exit 1
# With two cores or more, the server runs on CPU 0 and the benchmark client on CPU 1, so neither
# steals the other's core (unpinned, the ratios moved by ±30% between runs).
pin_client=()
wrap=$(mktemp -d)
trap 'rm -rf "$wrap"' EXIT
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then pin_client=(taskset -c 1); fi
for dir in "${dirs[@]}"; do
	name=system
	[ -n "$dir" ] && name=$(basename "$(cd "$dir" && pwd)")
	real=$(PATH="${dir:+$dir:}$PATH" command -v redis-server)
	if [ ${#pin_client[@]} -gt 0 ]; then
		printf '#!/usr/bin/env bash\nexec taskset -c 0 %q "$@"\n' "$real" > "$wrap/redis-server"
	else
		printf '#!/usr/bin/env bash\nexec %q "$@"\n' "$real" > "$wrap/redis-server"
	fi
	chmod +x "$wrap/redis-server"
	for config in no local; do
		echo "=== $name, enable-debug-command $config" >&2
		# The read-write lock's LOCK.* phases, the semaphore's and the family's once per server
		# (the config only matters to the script path, see docs/performance.md).
		only=redisson-ratios
		[ "$config" = no ] && only=redisson-ratios,rwlock-ratios,semaphore-ratios,family-ratios
		PATH="$wrap:$PATH" "${pin_client[@]}" bench/target/release/lock-bench \
			--module "$module" --out "$out/$name-$config" --only "$only" \
			--server-arg "--enable-debug-command $config" >/dev/null || status=1
	done
done
python3 - "$out" <<'PY'
import json, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
rows = []
for f in sorted(out.glob("*/results.json")):
    r = json.loads(f.read_text())
    server, config = f.parent.name.rsplit("-", 1)
    version = r["meta"]["redis_version"]
    for x in (r.get("redisson") or {}).get("ratios", []):
        # family.md section 14: a read unlock with 10 readers holding >= 3x, every other script >= 1.8x.
        need = 3.0 if "10 readers" in x["op"] else 1.8
        ok = x["throughput"] >= need and x["server_usec"] <= 0.45
        rows.append(f"| {server} ({version}) | {config} | {x['op']} | {x['throughput']:.2f}x | {x['server_usec']:.2f}x | >= {need}x and <= 0.45x | {'yes' if ok else 'NO'} |")
    for x in r.get("rwlock") or []:
        need = 3.0 if "10 readers" in x["op"] else 2.0
        usec = x["native_server_usec"] / x["lua_server_usec"] if x["lua_server_usec"] else float("nan")
        rows.append(f"| {server} ({version}) | {config} | LOCK.* {x['op']} | {x['ratio']:.2f}x | {usec:.2f}x | >= {need}x | {'yes' if x['ratio'] >= need else 'NO'} |")
    for x in r.get("semaphore") or []:
        # family.md section 14: LOCK.SEM* >= 2x the PES scripts, native scripts >= 1.8x.
        need = 2.0 if x["kind"].startswith("LOCK") else 1.8
        usec = x["fast_server_usec"] / x["lua_server_usec"] if x["lua_server_usec"] else float("nan")
        rows.append(f"| {server} ({version}) | {config} | semaphore {x['op']} ({x['kind']}) | {x['ratio']:.2f}x | {usec:.2f}x | >= {need}x | {'yes' if x['ratio'] >= need else 'NO'} |")
    for x in r.get("family") or []:
        # Every natively run family script >= 1.8x its script in Lua; RLock acquire is the reference.
        need = 1.8
        usec = x["native_server_usec"] / x["lua_server_usec"] if x["lua_server_usec"] else float("nan")
        ok = x["ratio"] >= need and x["unexpected_replies"] == 0
        met = "(reference)" if x["kind"] == "reference" else ("yes" if ok else "NO")
        rows.append(f"| {server} ({version}) | {config} | {x['op']} ({x['script']}) | {x['ratio']:.2f}x | {usec:.2f}x | >= {need}x | {met} |")
text = [f"Native vs Lua: Redisson's scripts (EVALSHA), the read-write lock's LOCK.* commands, the semaphore's and the family's scripts, pipelined (server kept busy), server and client pinned to separate cores, {time.strftime('%Y-%m-%d')}",
        "", "| server | enable-debug-command | operation | throughput | server µs | target | met |",
        "|---|---|---|---:|---:|---|---|", *rows]
(out / "summary.md").write_text("\n".join(text) + "\n")
print("\n".join(text))
PY
exit $status
