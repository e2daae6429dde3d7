#!/usr/bin/env bash
# Run redis-server with the lock module under valgrind (memcheck), drive a representative
# workload with redis-cli, shut the server down and report memory errors and definite leaks
# attributed to the module.
#
#   scripts/valgrind.sh            # builds target/release/libredis_lock.so first
#   SKIP_BUILD=1 MODULE=/path/libredis_lock.so KEEP=1 scripts/valgrind.sh
#
# Exit status: 0 when valgrind saw no invalid access, uninitialised use, bad free or definite
# leak in a stack that goes through the module, and every workload check passed; 1 otherwise;
# 2 when the server could not be started.
#
# The Debian redis-server calls malloc/free of a shared libjemalloc. valgrind only tracks the
# heap of the malloc it intercepts, so `--soname-synonyms=somalloc=libjemalloc.so*` routes
# jemalloc's malloc family to memcheck (the module allocates through RedisModule_Alloc ->
# zmalloc -> malloc, so its memory is tracked too); `--jemalloc-bg-thread no` keeps jemalloc's
# background thread out of the picture. `--keep-debuginfo=yes` keeps the module's symbols after
# MODULE UNLOAD so leak stacks still name it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=${MODULE:-$ROOT/target/release/libredis_lock.so}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
VALGRIND=${VALGRIND:-valgrind}
# Seconds to wait for anything the server must do; valgrind makes it 20-50x slower.
PATIENCE=${PATIENCE:-120}

for tool in "$VALGRIND" "$REDIS_SERVER" redis-cli; do
    command -v "$tool" >/dev/null || { echo "valgrind.sh: $tool not found" >&2; exit 2; }
done
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    (cd "$ROOT" && cargo build --release)
fi
[ -f "$MODULE" ] || { echo "valgrind.sh: no module at $MODULE" >&2; exit 2; }
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redis-lock-valgrind.XXXXXX")
LOG=$WORK/valgrind.log
SERVER_LOG=$WORK/redis.log
BG_PIDS=()
VG_PID=""

cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "$VG_PID" ] && kill -0 "$VG_PID" 2>/dev/null; then kill -9 "$VG_PID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# A port nobody listens on.
PORT=${PORT:-}
if [ -z "$PORT" ]; then
    for p in $(shuf -i 20000-60000 -n 50); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then PORT=$p; break; fi
    done
fi
[ -n "$PORT" ] || { echo "valgrind.sh: no free port" >&2; exit 2; }

cli() { redis-cli -p "$PORT" "$@"; }

FAILS=0
CHECKS=0
fail() { echo "  FAIL: $*"; FAILS=$((FAILS + 1)); }
# expect WANT CMD...: the command's reply (redis-cli raw output; nil prints as an empty line).
expect() {
    local want=$1 got
    shift
    CHECKS=$((CHECKS + 1))
    got=$(cli "$@" 2>&1) || true
    [ "$got" = "$want" ] || fail "$* -> '$got' (want '$want')"
}
# expect_prefix PREFIX CMD...
expect_prefix() {
    local want=$1 got
    shift
    CHECKS=$((CHECKS + 1))
    got=$(cli "$@" 2>&1) || true
    case "$got" in "$want"*) ;; *) fail "$* -> '$got' (want '$want...')" ;; esac
}
# expect_positive CMD...: an integer reply > 0 (a PTTL).
expect_positive() {
    local got
    CHECKS=$((CHECKS + 1))
    got=$(cli "$@" 2>&1) || true
    [ "$got" -gt 0 ] 2>/dev/null || fail "$* -> '$got' (want a positive integer)"
}
stat() { cli INFO lock | tr -d '\r' | sed -n "s/^lock_$1://p"; }
# wait_stat FIELD VALUE: poll INFO lock until lock_FIELD is VALUE.
wait_stat() {
    local i
    for ((i = 0; i < PATIENCE * 10; i++)); do
        [ "$(stat "$1")" = "$2" ] && return 0
        sleep 0.1
    done
    fail "lock_$1 never became $2 (is $(stat "$1"))"
}
# bg FILE CMD...: run a (blocking) command in the background, its reply into FILE.
bg() {
    local out=$1
    shift
    # redis-cli itself, not a subshell running `cli`: $! must be the client we may kill.
    redis-cli -p "$PORT" "$@" >"$out" 2>&1 &
    BG_PIDS+=($!)
}
# expect_file WANT FILE PID: the background command PID ends and wrote WANT.
expect_file() {
    CHECKS=$((CHECKS + 1))
    local i
    for ((i = 0; i < PATIENCE * 10; i++)); do
        kill -0 "$3" 2>/dev/null || break
        sleep 0.1
    done
    wait "$3" 2>/dev/null || true
    local got
    got=$(cat "$2")
    [ "$got" = "$1" ] || fail "background reply in $2: '$got' (want '$1')"
}
waiter_ids() { cli CLIENT LIST | tr -d '\r' | awk '/cmd=lock.acquire/ && / flags=b/ { sub("id=", "", $1); print $1 }'; }

echo "== redis-server $("$REDIS_SERVER" --version | awk '{print $3}') under $("$VALGRIND" --version), module $MODULE"
echo "   work dir $WORK, port $PORT"
"$VALGRIND" --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=40 \
    --soname-synonyms=somalloc=libjemalloc.so* --keep-debuginfo=yes --log-file="$LOG" \
    "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$WORK" --save "" --appendonly no \
    --jemalloc-bg-thread no --enable-module-command yes --enable-debug-command yes \
    --logfile "$SERVER_LOG" --loadmodule "$MODULE" &
VG_PID=$!

for ((i = 0; i < PATIENCE * 10; i++)); do
    [ "$(cli PING 2>/dev/null)" = PONG ] && break
    kill -0 "$VG_PID" 2>/dev/null || { echo "redis-server died at start-up"; cat "$SERVER_LOG" "$LOG"; exit 2; }
    sleep 0.1
done
[ "$(cli PING 2>/dev/null)" = PONG ] || { echo "redis-server did not answer within ${PATIENCE}s"; exit 2; }
echo "== server up; running the workload"

# 1. Plain commands: acquire (new, reentrant, contended), renew, release (partial, full,
#    not owner), force release, info, configs.
expect "" LOCK.ACQUIRE a me 60000
expect "" LOCK.ACQUIRE a me 60000
expect_positive LOCK.ACQUIRE a other 60000
expect 1 LOCK.RENEW a me 30000
expect 0 LOCK.RENEW a other 30000
expect_prefix "owners" LOCK.INFO a
expect 0 LOCK.RELEASE a me 30000
expect "" LOCK.RELEASE a other
expect 1 LOCK.RELEASE a me
expect "" LOCK.INFO a
expect "" LOCK.ACQUIRE b me 60000
expect 1 LOCK.FORCERELEASE b
expect 0 LOCK.FORCERELEASE b
expect OK CONFIG SET lock.channel-prefix valgrind_channel
expect OK CONFIG SET lock.publish-mode off
expect "" LOCK.ACQUIRE c me 60000
expect 1 LOCK.RELEASE c me
expect OK CONFIG SET lock.publish-mode global

# 2. Refusals and junk: every error path, keys of every type, binary keys and owners.
cli SET str x >/dev/null
cli RPUSH list x >/dev/null
cli HSET junk me abc zero 0 max 9223372036854775807 >/dev/null
expect_prefix "WRONGTYPE" LOCK.ACQUIRE str me 1000
expect_prefix "WRONGTYPE" LOCK.INFO list
expect_prefix "ERR lock hash" LOCK.ACQUIRE junk me 1000
expect_prefix "ERR lock hash" LOCK.ACQUIRE junk max 1000
expect_prefix "ERR lock hash" LOCK.INFO junk
expect_prefix "ERR lease-ms" LOCK.ACQUIRE d me 0
expect_prefix "ERR lease-ms" LOCK.ACQUIRE d me 9223372036854775807
expect_prefix "ERR timeout-ms" LOCK.ACQUIRE d me 10 WAIT -1
expect_prefix "ERR syntax" LOCK.ACQUIRE d me 10 WAIT 1 WAIT 1
expect_prefix "ERR owner" LOCK.RELEASE d ""
expect_prefix "ERR wrong number" LOCK.RENEW d
{
    for i in $(seq 1 300); do
        case $((i % 10)) in
            0) echo "LOCK.ACQUIRE k$((i % 7)) o$((i % 3)) $((i * 3))" ;;
            1) echo "LOCK.RELEASE k$((i % 7)) o$((i % 3))" ;;
            2) echo "LOCK.RENEW k$((i % 7)) o$((i % 3)) 5000" ;;
            3) echo "LOCK.INFO k$((i % 7))" ;;
            4) echo "LOCK.FORCERELEASE k$((i % 7))" ;;
            5) echo "LOCK.ACQUIRE k$((i % 7)) o$i x" ;;
            6) echo "LOCK.ACQUIRE \"\\x00\\xffbin$((i % 5))\" \"\\x00o\\xff\" 5000" ;;
            7) echo "LOCK.RELEASE \"\\x00\\xffbin$((i % 5))\" \"\\x00o\\xff\" 100" ;;
            8) echo "MULTI"; echo "LOCK.ACQUIRE k1 multi 1000 WAIT 0"; echo "LOCK.INFO k1"; echo "EXEC" ;;
            9) echo "EVAL \"return redis.pcall('LOCK.ACQUIRE', KEYS[1], 'lua', '1000', 'WAIT', '0')\" 1 k$((i % 7))" ;;
        esac
    done
} | cli >/dev/null 2>&1 || fail "scripted batch"

# 3. WAIT that times out (reply: the holder's PTTL).
expect "" LOCK.ACQUIRE w1 holder 60000
expect_positive LOCK.ACQUIRE w1 waiter 1000 WAIT 300

# 4. WAIT granted by a release (handoff) and by the holder's lease running out.
bg "$WORK/w2" LOCK.ACQUIRE w1 w2 60000 WAIT 0
W2=$!
wait_stat waiters 1
expect 1 LOCK.RELEASE w1 holder
expect_file "" "$WORK/w2" "$W2"
expect "" LOCK.ACQUIRE w3 holder 1500
bg "$WORK/w3" LOCK.ACQUIRE w3 w3 60000 WAIT 0
W3=$!
expect_file "" "$WORK/w3" "$W3"
expect_prefix "owners" LOCK.INFO w3

# 5. Waiters that disconnect (client killed) and waiters unblocked with CLIENT UNBLOCK.
expect "" LOCK.ACQUIRE w4 holder 600000
bg "$WORK/w4a" LOCK.ACQUIRE w4 gone 1000 WAIT 0
W4A=$!
bg "$WORK/w4b" LOCK.ACQUIRE w4 gone2 1000 WAIT 0
wait_stat waiters 2
kill "$W4A"
wait "$W4A" 2>/dev/null || true
wait_stat waiters 1
for id in $(waiter_ids); do cli CLIENT KILL ID "$id" >/dev/null; done
wait_stat waiters 0
bg "$WORK/w5" LOCK.ACQUIRE w4 unblocked 1000 WAIT 0
W5=$!
bg "$WORK/w6" LOCK.ACQUIRE w4 unblocked-err 1000 WAIT 60000
W6=$!
wait_stat waiters 2
ids=$(waiter_ids)
first=1
for id in $ids; do
    if [ $first = 1 ]; then cli CLIENT UNBLOCK "$id" >/dev/null; first=0; else cli CLIENT UNBLOCK "$id" ERROR >/dev/null; fi
done
wait_stat waiters 0
wait "$W5" "$W6" 2>/dev/null || true
# One was unblocked as a timeout (reply: the PTTL), the other with ERROR (Redis's UNBLOCKED).
CHECKS=$((CHECKS + 1))
replies=$(cat "$WORK/w5" "$WORK/w6" | grep -v '^$' | sort | tr '\n' ' ')
case "$replies" in
    [1-9]*" UNBLOCKED client unblocked via CLIENT UNBLOCK ") ;;
    *) fail "CLIENT UNBLOCK replies: '$replies'" ;;
esac

# 6. FLUSHALL while clients wait: the locks are gone, the waiters get them.
expect "" LOCK.ACQUIRE f1 holder 600000
expect "" LOCK.ACQUIRE f2 holder 600000
bg "$WORK/f1" LOCK.ACQUIRE f1 after-flush 60000 WAIT 0
F1=$!
bg "$WORK/f2" LOCK.ACQUIRE f2 after-flush 60000 WAIT 0
F2=$!
wait_stat waiters 2
expect OK FLUSHALL
expect_file "" "$WORK/f1" "$F1"
expect_file "" "$WORK/f2" "$F2"
wait_stat waiters 0

# 7. A key that changes type under its waiters (they get WRONGTYPE).
expect "" LOCK.ACQUIRE t1 holder 600000
bg "$WORK/t1" LOCK.ACQUIRE t1 typed 60000 WAIT 0
T1=$!
wait_stat waiters 1
expect OK SET t1 now-a-string
expect_file "WRONGTYPE Operation against a key holding the wrong kind of value" "$WORK/t1" "$T1"

echo "   module stats before MODULE UNLOAD: $(cli INFO lock | tr -d '\r' | grep '^lock_' | tr '\n' ' ')"

# Leak check while the module is still loaded: what is definitely lost now was lost at run time.
# (After MODULE UNLOAD, memory the module keeps in statics - configs, the waiter table's spare
# capacity, strings made at load - becomes unreachable; that is reported separately below.)
if command -v vgdb >/dev/null; then
    vgdb --pid="$VG_PID" leak_check full definiteleak >"$WORK/leaks-loaded.txt" 2>&1 || echo "   (vgdb leak check failed)"
else
    echo "   (vgdb not found: no leak check before MODULE UNLOAD)"
fi

# 8. MODULE UNLOAD is refused while clients wait, allowed once they are served; then the
#    module is loaded again and used once more.
expect "" LOCK.ACQUIRE u1 holder 600000
bg "$WORK/u1" LOCK.ACQUIRE u1 unload 60000 WAIT 0
U1=$!
wait_stat waiters 1
expect_prefix "ERR" MODULE UNLOAD lock
expect 1 LOCK.FORCERELEASE u1
expect_file "" "$WORK/u1" "$U1"
wait_stat waiters 0
expect OK MODULE UNLOAD lock
expect OK MODULE LOAD "$MODULE"
expect "" LOCK.ACQUIRE again me 60000
expect_positive LOCK.ACQUIRE again waiter 60000 WAIT 200
bg "$WORK/again" LOCK.ACQUIRE again waiter 60000 WAIT 0
AG=$!
wait_stat waiters 1
expect 1 LOCK.RELEASE again me
expect_file "" "$WORK/again" "$AG"
CHECKS=$((CHECKS + 1))
[ "$(stat panics_caught)" = 0 ] || fail "lock_panics_caught = $(stat panics_caught)"
echo "== workload done: $CHECKS checks, $FAILS failed"

# Shut down and let valgrind write its report.
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
VG_RC=0
wait "$VG_PID" || VG_RC=$?
VG_PID=""

# Records of a valgrind report (a blank `==pid== ` line separates them) that are errors or
# definite leaks with a stack through the module.
module_records() {
    awk -v want="$2" '
        function flush() {
            if (rec != "" && rec ~ /libredis_lock|redis_lock::|redis_module::/ && head ~ want) print rec
            rec = ""; head = ""
        }
        { line = $0; sub(/^==[0-9]+== ?/, "", line) }
        line == "" { flush(); next }
        { if (rec == "") head = line; rec = rec line "\n" }
        END { flush() }
    ' "$1"
}
ERRORS_RE='Invalid (read|write|free)|Mismatched free|uninitialised|Conditional jump|Source and destination overlap|Syscall param|Argument .* of function'
LEAK_RE='definitely lost in loss record'
lost_bytes() { awk '{ gsub(",", "", $1); n += $1 } END { print n + 0 }'; }

errors=$(module_records "$LOG" "$ERRORS_RE")
n_errors=$(printf "%s" "$errors" | grep -cE "^($ERRORS_RE)" || true)
leaks_loaded=""
[ -f "$WORK/leaks-loaded.txt" ] && leaks_loaded=$(module_records "$WORK/leaks-loaded.txt" "$LEAK_RE")
n_leaks_loaded=$(printf "%s" "$leaks_loaded" | grep -c "$LEAK_RE" || true)
leaks_exit=$(module_records "$LOG" "$LEAK_RE")
n_leaks_exit=$(printf "%s" "$leaks_exit" | grep -c "$LEAK_RE" || true)
bytes_exit=$(printf "%s" "$leaks_exit" | grep "$LEAK_RE" | lost_bytes)

echo "== valgrind summary (valgrind exit code $VG_RC; full log: $LOG)"
sed -n '/ERROR SUMMARY/p; /definitely lost:/p; /indirectly lost:/p; /possibly lost:/p; /still reachable:/p' "$LOG" |
    sed 's/^==[0-9]*== /   /'
echo "   invalid reads/writes/frees, uninitialised values in the module: $n_errors"
echo "   definite leaks through the module while it was loaded: $n_leaks_loaded"
echo "   definite leaks through the module at exit, after MODULE UNLOAD + LOAD: $n_leaks_exit blocks, $bytes_exit bytes"
[ "$n_errors" != 0 ] && printf "\n-- module memory errors --\n%s\n" "$errors"
[ "$n_leaks_loaded" != 0 ] && printf "\n-- module leaks while loaded --\n%s\n" "$leaks_loaded"
if [ "$n_leaks_exit" != 0 ]; then
    echo "   (memory the first load kept in statics, abandoned by MODULE UNLOAD; allocation sites:)"
    printf "%s" "$leaks_exit" | awk '/definitely lost in loss record/ { l = $0; getline; s = ""; n = 0
        while (n < 40 && (getline line) > 0) { if (line ~ /redis_lock::|redis_module::/) { sub(/^ *by 0x[0-9A-F]+: /, "", line); s = line; break } n++ }
        print "     " l "  <- " s }'
fi
status=0
if [ "$n_errors" != 0 ] || [ "$n_leaks_loaded" != 0 ] || [ "$FAILS" != 0 ]; then status=1; fi
if [ "${STRICT_UNLOAD:-0}" = 1 ] && [ "$n_leaks_exit" != 0 ]; then status=1; fi
if [ "$status" != 0 ]; then
    KEEP=1
    exit 1
fi
echo "== OK: no memory errors or definite leaks in the module"
