//! Scenario "family": the rest of Redisson's family run natively against the same scripts in
//! Lua: the fair lock (a free lock taken and released, the queue head taking the lock with 10
//! and 100 waiters behind it, a newcomer queueing behind 10 and 100), the count-down latch
//! (countDown, trySetCount), the spin lock's unlock and the non-reentrant lock's acquire, with
//! Redisson's RLock acquire as the reference (the ratio of a script measured in the
//! "redisson" scenario, on the same server in the same run). No contended part yet: "family"
//! and "family-ratios" run the same phases.
//!
//! The scripts are our own implementations (`clients/python/src/redislock/lua/fair-*.lua`,
//! `latch-*.lua`, `spin-*.lua`, `nonreentrant-*.lua`), registered with
//! `lock.redisson-extra-scripts` so that in `native` mode they take the path of Redisson's
//! SHA1s. Phases are pipelined over distinct keys (`pipelined.rs`), the set-up untimed, the two
//! sides alternating in 7 repetitions; a ratio is the median of the repetitions' ratios. Every
//! native call is checked to have run natively (`INFO lock`: `redisson_<op>_native` grew by the
//! calls made, `redisson_<op>_lua` did not grow).

use crate::pipelined;
use crate::stats::median;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use testkit::resp::{Conn, R};
use testkit::scripts::{extra_spec, info_counts, lua};

const LEASE: i64 = 30_000;
/// Redisson's default `threadWaitTime` (5 minutes).
const WAIT: i64 = 300_000;
/// The unlock latch's PX.
const LATCH_PX: i64 = 16_000;
/// A count that stays above 0 through every countDown of a phase.
const COUNT: i64 = 1_000_000;

/// The operations of the scripts this scenario sends.
const SCRIPTS: [&str; 8] = [
    "fair-acquire",
    "fair-tryacquire",
    "fair-unlock-latch",
    "latch-countdown",
    "latch-trysetcount",
    "spin-unlock-latch",
    "nonreentrant-acquire",
    "acquire",
];

fn sha(op: &str) -> String {
    sha1_smol::Sha1::from(lua(op).as_bytes()).digest().to_string()
}

fn set_mode(con: &mut redis::Connection, mode: &str) {
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("lock.redisson-scripts").arg(mode).query(con).expect("mode");
}

fn key(i: usize) -> String {
    format!("famb:{i:06}")
}

fn queue(k: &str) -> String {
    format!("redisson_lock_queue:{{{k}}}")
}

fn deadlines(k: &str) -> String {
    format!("redisson_lock_timeout:{{{k}}}")
}

fn channel_prefix(k: &str) -> String {
    format!("redisson_lock__channel:{{{k}}}")
}

fn latch_channel(k: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{k}}}")
}

/// Phases started so far: every unlock latch name is new (the phases FLUSHALL too).
static PHASES: AtomicU64 = AtomicU64::new(0);

/// The unlock latch of call `i` of phase `phase`.
fn latch(k: &str, phase: u64, i: usize) -> String {
    format!("redisson_unlock_latch:{{{k}}}:{phase:016x}{i:016x}")
}

/// Redisson's owner: connection-manager id and thread id. `0` is the lock's holder or the
/// queue's head, `1..=n` the waiters behind it, [`NEWCOMER`] the one that joins the queue.
fn owner(t: usize) -> String {
    format!("a3f1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b:{}", t + 1)
}

const NEWCOMER: usize = 999_999;
const HOLDER: &str = "0b9a8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d:1";

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    /// `fair-acquire` of a free lock, no queue.
    FairAcquire,
    /// `fair-tryacquire` of a free lock, no queue.
    FairTryAcquire,
    /// `fair-unlock-latch`: the only hold released, no queue (reply 1).
    FairUnlock,
    /// `fair-acquire` by the queue's head, the lock free, this many waiters behind it: it takes
    /// the lock and every waiter's deadline is lowered by the wait.
    HeadTakes(usize),
    /// `fair-acquire` by a newcomer, the lock held, this many queued: it joins the tail.
    Enqueue(usize),
    /// `latch-countdown` of a count that stays above 0, the first on its latch (the count as
    /// SET left it: integer-encoded).
    CountDown,
    /// `latch-countdown` of a latch counted down by many workers: [`SHARED`] calls per latch.
    CountDownShared,
    /// `latch-trysetcount` of a fresh latch.
    TrySetCount,
    /// `spin-unlock-latch`: the only hold released.
    SpinUnlock,
    /// `nonreentrant-acquire` of a free lock.
    NonReentrantAcquire,
    /// RLock `acquire` of a free lock (the reference).
    Acquire,
}

impl Op {
    fn script(self) -> &'static str {
        match self {
            Op::FairAcquire | Op::HeadTakes(_) | Op::Enqueue(_) => "fair-acquire",
            Op::FairTryAcquire => "fair-tryacquire",
            Op::FairUnlock => "fair-unlock-latch",
            Op::CountDown | Op::CountDownShared => "latch-countdown",
            Op::TrySetCount => "latch-trysetcount",
            Op::SpinUnlock => "spin-unlock-latch",
            Op::NonReentrantAcquire => "nonreentrant-acquire",
            Op::Acquire => "acquire",
        }
    }

    fn label(self) -> String {
        match self {
            Op::FairAcquire => "fair lock: acquire a free lock".into(),
            Op::FairTryAcquire => "fair lock: tryLock a free lock".into(),
            Op::FairUnlock => "fair lock: unlock (full release, latch)".into(),
            Op::HeadTakes(w) => format!("fair lock: queue head takes the lock, {w} waiters behind"),
            Op::Enqueue(w) => format!("fair lock: newcomer queues, lock held, {w} queued"),
            Op::CountDown => "count-down latch: countDown, the latch's first (count stays > 0)".into(),
            Op::CountDownShared => {
                format!("count-down latch: countDown, {SHARED} per latch (count stays > 0)")
            }
            Op::TrySetCount => "count-down latch: trySetCount (fresh)".into(),
            Op::SpinUnlock => "spin lock: unlock (full release, latch)".into(),
            Op::NonReentrantAcquire => "non-reentrant lock: acquire a free lock".into(),
            Op::Acquire => "RLock: acquire a free lock (reference)".into(),
        }
    }

    fn kind(self) -> &'static str {
        if self == Op::Acquire {
            "reference"
        } else {
            "native vs Lua"
        }
    }

    /// Waiters in the queue of each lock (the phase runs in rounds of locks).
    fn waiters(self) -> usize {
        match self {
            Op::HeadTakes(w) | Op::Enqueue(w) => w,
            _ => 0,
        }
    }
}

/// The deadline of queue member `t` (0 the head): far in the future, in queue order.
fn deadline(now: i64, t: usize) -> i64 {
    now + 2 * WAIT + t as i64 * WAIT
}

/// The untimed set-up of lock `i` for `op`.
fn setup(op: Op, i: usize, now: i64) -> Vec<redis::Cmd> {
    let k = key(i);
    let held = |holder: &str| {
        let (mut h, mut p) = (redis::cmd("HSET"), redis::cmd("PEXPIRE"));
        h.arg(&k).arg(holder).arg(1);
        p.arg(&k).arg(LEASE);
        [h, p]
    };
    // Members 0..=w in the queue, with their deadlines.
    let queued = |first: usize, w: usize| {
        let (mut l, mut z) = (redis::cmd("RPUSH"), redis::cmd("ZADD"));
        l.arg(queue(&k));
        z.arg(deadlines(&k));
        for t in first..=w {
            l.arg(owner(t));
            z.arg(deadline(now, t)).arg(owner(t));
        }
        [l, z]
    };
    match op {
        Op::FairAcquire | Op::FairTryAcquire | Op::TrySetCount | Op::NonReentrantAcquire | Op::Acquire => {
            vec![]
        }
        Op::FairUnlock | Op::SpinUnlock => held(&owner(0)).to_vec(),
        Op::HeadTakes(w) => queued(0, w).to_vec(),
        Op::Enqueue(w) => held(HOLDER).into_iter().chain(queued(1, w)).collect(),
        Op::CountDown => {
            let mut c = redis::cmd("SET");
            c.arg(&k).arg(COUNT);
            vec![c]
        }
        Op::CountDownShared if i.is_multiple_of(SHARED) => {
            let mut c = redis::cmd("SET");
            c.arg(key(i / SHARED)).arg(COUNT);
            vec![c]
        }
        Op::CountDownShared => vec![],
    }
}

/// Calls per latch of [`Op::CountDownShared`]: the workers a latch waits for.
const SHARED: usize = 50;

/// Call `j` of phase `phase` on lock `i`.
fn command(op: Op, i: usize, phase: u64, now: i64) -> redis::Cmd {
    let k = key(i);
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha(op.script()));
    match op {
        Op::FairAcquire | Op::HeadTakes(_) | Op::Enqueue(_) => {
            let who = if matches!(op, Op::Enqueue(_)) { NEWCOMER } else { 0 };
            c.arg(3).arg(&k).arg(queue(&k)).arg(deadlines(&k));
            c.arg(LEASE).arg(owner(who)).arg(WAIT).arg(now);
        }
        Op::FairTryAcquire => {
            c.arg(3).arg(&k).arg(queue(&k)).arg(deadlines(&k));
            c.arg(LEASE).arg(owner(0)).arg(now).arg(WAIT);
        }
        Op::FairUnlock => {
            c.arg(5).arg(&k).arg(queue(&k)).arg(deadlines(&k)).arg(channel_prefix(&k));
            c.arg(latch(&k, phase, i));
            c.arg(0).arg(LEASE).arg(owner(0)).arg(now).arg("PUBLISH").arg(LATCH_PX);
        }
        Op::CountDown => {
            c.arg(2).arg(&k).arg(latch_channel(&k)).arg(0).arg("PUBLISH");
        }
        Op::CountDownShared => {
            let k = key(i / SHARED);
            c.arg(2).arg(&k).arg(latch_channel(&k)).arg(0).arg("PUBLISH");
        }
        Op::TrySetCount => {
            c.arg(2).arg(&k).arg(latch_channel(&k)).arg(1).arg(COUNT).arg("PUBLISH");
        }
        Op::SpinUnlock => {
            c.arg(2).arg(&k).arg(latch(&k, phase, i));
            c.arg(LEASE).arg(owner(0)).arg(LATCH_PX);
        }
        Op::NonReentrantAcquire => {
            c.arg(1).arg(&k).arg(LEASE).arg(owner(0)).arg("ERR lock is not reentrant");
        }
        Op::Acquire => {
            c.arg(1).arg(&k).arg(LEASE).arg(owner(0));
        }
    }
    c
}

fn expected(op: Op, v: &R) -> bool {
    match op {
        Op::FairAcquire
        | Op::FairTryAcquire
        | Op::HeadTakes(_)
        | Op::CountDown
        | Op::CountDownShared
        | Op::NonReentrantAcquire
        | Op::Acquire => matches!(v, R::Nil),
        Op::FairUnlock | Op::SpinUnlock | Op::TrySetCount => matches!(v, R::Int(1)),
        // The ttl: the last waiter's deadline less now.
        Op::Enqueue(_) => matches!(v, R::Int(t) if *t > WAIT),
    }
}

/// One phase of `op` over `n` locks: set-up (untimed), timed, FLUSHALL. (ops/s, server µs per
/// call, unexpected replies).
fn phase(con: &mut redis::Connection, port: u16, op: Op, native: bool, n: usize) -> (f64, f64, usize) {
    let now = now_ms();
    let id = PHASES.fetch_add(1, Ordering::Relaxed);
    let set: Vec<redis::Cmd> = (0..n).flat_map(|i| setup(op, i, now)).collect();
    pipelined::untimed(con, &set);
    let cmds: Vec<redis::Cmd> = (0..n).map(|i| command(op, i, id, now)).collect();
    let stat = if native { "lock.redisson" } else { "evalsha" };
    let r = pipelined::timed(con, port, &cmds, stat, |v| expected(op, v));
    let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
    r
}

/// `calls` calls of `op`: one phase, or with queues in rounds of
/// [`pipelined::ten_reader_locks`] locks (each set up untimed), combined over the rounds.
fn rounds(con: &mut redis::Connection, port: u16, op: Op, native: bool, calls: usize) -> (f64, f64, usize) {
    if op.waiters() == 0 {
        return phase(con, port, op, native, calls);
    }
    pipelined::in_rounds(calls, |m| phase(con, port, op, native, m))
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    /// The script (`lock.redisson-extra-scripts` and INFO name).
    pub script: String,
    /// "native vs Lua", or "reference" (RLock acquire, not a family script).
    pub kind: String,
    pub native_ops_per_sec: f64,
    pub lua_ops_per_sec: f64,
    pub ratio: f64,
    pub native_server_usec: f64,
    pub lua_server_usec: f64,
    /// Calls of the native side, all counted by `redisson_<script>_native` in INFO lock.
    pub native_calls: u64,
    pub unexpected_replies: usize,
}

/// `INFO lock`'s count of `script` run natively and left to Lua.
fn counts(raw: &mut Conn, script: &str) -> (i64, i64) {
    let name = script.replace('-', "_");
    let get = |suffix: &str, raw: &mut Conn| {
        *info_counts(raw, suffix)
            .get(&name)
            .unwrap_or_else(|| panic!("INFO lock has no redisson_{name}{suffix}"))
    };
    (get("_native", raw), get("_lua", raw))
}

/// Both sides of `op`, alternating, `reps` times; the median of the paired ratios. Panics when
/// a native call did not run natively.
fn compare(con: &mut redis::Connection, raw: &mut Conn, port: u16, op: Op, calls: usize, reps: usize) -> Row {
    eprintln!("[family] {}: {calls} calls per phase, {reps} rep(s)", op.label());
    let before = counts(raw, op.script());
    let side = |con: &mut redis::Connection, native: bool| {
        set_mode(con, if native { "native" } else { "lua" });
        rounds(con, port, op, native, calls)
    };
    let (mut nat, mut slow) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        // Each side goes first in every other repetition (no order effect in the pairs).
        if rep % 2 == 0 {
            nat.push(side(con, true));
            slow.push(side(con, false));
        } else {
            slow.push(side(con, false));
            nat.push(side(con, true));
        }
    }
    set_mode(con, "lua");
    let after = counts(raw, op.script());
    let native_calls = (calls * reps) as u64;
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (native_calls as i64, 0),
        "[family] {}: INFO lock redisson_{}_native / _lua grew by these, not by ({native_calls}, 0): \
         a native call fell back to Lua or did not take the native path",
        op.label(),
        op.script().replace('-', "_")
    );
    let m = |v: &[(f64, f64, usize)], f: fn(&(f64, f64, usize)) -> f64| median(v.iter().map(f).collect());
    Row {
        op: op.label(),
        script: op.script().into(),
        kind: op.kind().into(),
        native_ops_per_sec: m(&nat, |x| x.0),
        lua_ops_per_sec: m(&slow, |x| x.0),
        // The ratio of each repetition's two phases (seconds apart), then their median.
        ratio: median(nat.iter().zip(&slow).map(|(a, b)| a.0 / b.0).collect()),
        native_server_usec: m(&nat, |x| x.1),
        lua_server_usec: m(&slow, |x| x.1),
        native_calls,
        unexpected_replies: nat.iter().chain(&slow).map(|x| x.2).sum(),
    }
}

fn register(con: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.redisson-extra-scripts")
        .arg(extra_spec())
        .query(con)
        .expect("extra scripts");
    for op in SCRIPTS {
        let s: String = redis::cmd("SCRIPT").arg("LOAD").arg(lua(op)).query(con).expect("SCRIPT LOAD");
        assert_eq!(s, sha(op));
    }
}

pub fn run(con: &mut redis::Connection, port: u16, quick: bool) -> Vec<Row> {
    register(con);
    let mut raw = Conn::new(port);
    let (n, reps) = if quick { (2_000, 1) } else { (50_000, 7) };
    let mut rows = Vec::new();
    for op in [
        Op::FairAcquire,
        Op::FairTryAcquire,
        Op::FairUnlock,
        Op::HeadTakes(10),
        Op::HeadTakes(100),
        Op::Enqueue(10),
        Op::Enqueue(100),
        Op::CountDown,
        Op::CountDownShared,
        Op::TrySetCount,
        Op::SpinUnlock,
        Op::NonReentrantAcquire,
        Op::Acquire,
    ] {
        // A hundred waiters per lock: fewer calls (each Lua call makes a hundred ZINCRBYs).
        let calls = if op.waiters() >= 100 { n / 5 } else { n };
        rows.push(compare(con, &mut raw, port, op, calls, reps));
    }
    rows
}

pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "\n## Redisson's fair lock, count-down latch, spin and non-reentrant lock scripts: native vs Lua\n\n",
    );
    s.push_str("The same script sent with EVALSHA (our own implementation, registered with `lock.redisson-extra-scripts`), `native` vs `lua`, switched at run time; pipelined over distinct keys (batches of 32, 4 unanswered), set-up untimed, median of 7 alternating repetitions (ratio: median of the paired ratios). Every native call was counted by `INFO lock` as run natively. Server µs: `lock.redisson` vs `evalsha` usec_per_call.\n\n");
    s.push_str(
        "| operation | script | native ops/s | Lua ops/s | ratio | native server µs | Lua server µs |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {:.2} | {:.2} |{}\n",
            r.op,
            r.script,
            r.native_ops_per_sec,
            r.lua_ops_per_sec,
            r.ratio,
            r.native_server_usec,
            r.lua_server_usec,
            if r.unexpected_replies > 0 {
                format!(" ⚠ {} unexpected replies", r.unexpected_replies)
            } else {
                String::new()
            }
        ));
    }
    s
}
