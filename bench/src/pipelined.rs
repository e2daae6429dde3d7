//! Pipelined phases that keep the server busy: batches of [`DEPTH`] commands with up to
//! [`WINDOW`] batches unanswered, read with the raw RESP client.
//!
//! A client that waits for a whole batch's replies before sending the next one leaves the
//! server idle for a round trip per batch (on this 2-core VM about as long as a script's own
//! work): time that both sides of a ratio pay alike and that pulls every ratio towards 1x. With
//! the next batches already queued the server never waits, so calls/s is what the server can
//! serve, as with several clients pipelining at once (redis-benchmark's `-c 50 -P 32`).

use std::time::Instant;
use testkit::resp::{Conn, R};

/// Commands per batch.
pub const DEPTH: usize = 32;
/// Batches sent and not yet answered, at most.
pub const WINDOW: usize = 4;

/// Locks in one round of a "10 readers holding" phase (the phase is rounds of this many locks
/// until its calls are made; only the releases are timed): 2 000 locks are 22 000 keys, which
/// stay in cache as a busy lock's keys do. `LOCK_BENCH_TEN_LOCKS=20000` measures the walk over
/// 220 000 keys instead, where every hold looked at is a few cache misses on both sides.
pub fn ten_reader_locks(calls: usize) -> usize {
    let n = std::env::var("LOCK_BENCH_TEN_LOCKS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000usize);
    n.clamp(1, calls.max(1))
}

/// `calls` calls of a "10 readers holding" phase in rounds of [`ten_reader_locks`] locks:
/// `round(m)` sets up `m` locks, times `m` releases and returns (calls/s, server µs per call,
/// unexpected replies); the result is the same over all the rounds' timed calls.
pub fn in_rounds(calls: usize, mut round: impl FnMut(usize) -> (f64, f64, usize)) -> (f64, f64, usize) {
    let locks = ten_reader_locks(calls);
    let (mut done, mut secs, mut usec, mut bad) = (0usize, 0.0f64, 0.0f64, 0usize);
    while done < calls {
        let m = locks.min(calls - done);
        let (per_sec, per_call, b) = round(m);
        secs += m as f64 / per_sec;
        usec += per_call * m as f64;
        bad += b;
        done += m;
    }
    (calls as f64 / secs, usec / calls as f64, bad)
}

/// Packed batches of [`DEPTH`] commands: (bytes, commands in it).
pub fn batches(cmds: impl IntoIterator<Item = Vec<u8>>) -> Vec<(Vec<u8>, usize)> {
    let mut out: Vec<(Vec<u8>, usize)> = Vec::new();
    for c in cmds {
        match out.last_mut() {
            Some((buf, n)) if *n < DEPTH => {
                buf.extend_from_slice(&c);
                *n += 1;
            }
            _ => out.push((c, 1)),
        }
    }
    out
}

/// Send `batches` on a new connection to `port`, at most [`WINDOW`] unanswered, and read every
/// reply; returns the seconds it took and how many replies `ok` refused (the first three are
/// printed).
pub fn run(port: u16, batches: &[(Vec<u8>, usize)], ok: impl Fn(&R) -> bool) -> (f64, usize) {
    let mut raw = Conn::new(port);
    let mut bad = 0;
    let t0 = Instant::now();
    let mut sent = 0;
    for (i, (_, replies)) in batches.iter().enumerate() {
        while sent < batches.len() && sent < i + WINDOW {
            raw.send_raw(&batches[sent].0);
            sent += 1;
        }
        for _ in 0..*replies {
            let v = raw.read().expect("reply");
            if !ok(&v) {
                if bad < 3 {
                    eprintln!("  unexpected reply: {v:?}");
                }
                bad += 1;
            }
        }
    }
    (t0.elapsed().as_secs_f64(), bad)
}

/// A timed phase of `cmds` (as [`run`]): (calls/s, server µs per call of `stat` in INFO
/// commandstats, unexpected replies).
pub fn timed(
    con: &mut redis::Connection,
    port: u16,
    cmds: &[redis::Cmd],
    stat: &str,
    ok: impl Fn(&R) -> bool,
) -> (f64, f64, usize) {
    let batches = batches(cmds.iter().map(|c| c.get_packed_command()));
    testkit::reset_stats(con);
    let (secs, bad) = run(port, &batches, ok);
    let (calls, usec) = testkit::cmdstat(con, stat);
    let per = if calls > 0 { usec as f64 / calls as f64 } else { f64::NAN };
    (cmds.len() as f64 / secs, per, bad)
}

/// Run `cmds` untimed, pipelined 64 at a time (set-up and clean-up).
pub fn untimed(con: &mut redis::Connection, cmds: &[redis::Cmd]) {
    for ch in cmds.chunks(64) {
        let mut p = redis::pipe();
        for c in ch {
            p.add_command(c.clone());
        }
        let _: Vec<redis::Value> = p.query(con).expect("pipeline");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_depth_commands_each() {
        let b = batches((0..70u8).map(|i| vec![i]));
        assert_eq!(b.iter().map(|x| x.1).collect::<Vec<_>>(), vec![32, 32, 6]);
        assert_eq!(b[2].0, (64..70u8).collect::<Vec<_>>());
        assert!(batches(Vec::<Vec<u8>>::new()).is_empty());
    }

    #[test]
    fn rounds_combine_into_one_phase_over_every_timed_call() {
        if std::env::var_os("LOCK_BENCH_TEN_LOCKS").is_some() {
            return;
        }
        let mut sizes = Vec::new();
        // Each round takes 0.1 s and m µs a call.
        let (per_sec, per_call, bad) = in_rounds(5_000, |m| {
            sizes.push(m);
            (m as f64 * 10.0, m as f64, 1)
        });
        assert_eq!(sizes, vec![2_000, 2_000, 1_000]);
        assert!((per_sec - 5_000.0 / 0.3).abs() < 1e-6);
        assert!((per_call - 1_800.0).abs() < 1e-9);
        assert_eq!(bad, 3);
        assert_eq!(in_rounds(10, |m| (m as f64, 1.0, 0)).0, 10.0);
    }
}
