//! `INFO` helpers over a `redis` crate connection: whole sections, single integer fields, the
//! module's `INFO lock` counters, per-command stats and replication offsets.

use crate::server::wait_for;
use std::collections::HashMap;
use std::time::Duration;

/// `INFO <section>` as field -> value (section headers skipped).
pub fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// An integer field of `INFO <section>`; panics when the field is missing.
pub fn info_int(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no INFO {section} field {field}:\n{info}"))
}

/// `INFO lock` as (field -> value) with the `lock_` prefix removed.
pub fn lock_info(con: &mut redis::Connection) -> HashMap<String, String> {
    let info: String = redis::cmd("INFO").arg("lock").query(con).expect("INFO lock");
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| k.strip_prefix("lock_").map(|k| (k.to_string(), v.trim().to_string())))
        .collect()
}

/// One integer of `INFO lock` (without its `lock_` prefix); panics when it is missing.
pub fn stat(con: &mut redis::Connection, name: &str) -> i64 {
    lock_info(con)
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no INFO field lock_{name}"))
}

/// Wait up to `limit` for the replica behind `replica` to process the master's replication
/// stream up to its current offset. `WAIT` is no substitute: it only covers the writes of the
/// connection that calls it, not those of other clients or of module timers.
pub fn replica_caught_up(
    master: &mut redis::Connection,
    replica: &mut redis::Connection,
    limit: Duration,
) -> bool {
    let offset = info_int(master, "replication", "master_repl_offset");
    wait_for(limit, || (info_int(replica, "replication", "slave_repl_offset") >= offset).then_some(()))
        .is_some()
}

/// Server CPU seconds (user + sys) so far.
pub fn cpu_seconds(con: &mut redis::Connection) -> f64 {
    let i = info(con, "cpu");
    let f = |k: &str| i.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    f("used_cpu_user") + f("used_cpu_sys")
}

/// (calls, usec) of one command from `INFO commandstats` (0, 0 when never called).
pub fn cmdstat(con: &mut redis::Connection, name: &str) -> (u64, u64) {
    let i = info(con, "commandstats");
    let Some(v) = i.get(&format!("cmdstat_{name}")) else { return (0, 0) };
    let mut calls = 0;
    let mut usec = 0;
    for part in v.split(',') {
        if let Some((k, val)) = part.split_once('=') {
            match k {
                "calls" => calls = val.parse().unwrap_or(0),
                "usec" => usec = val.parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    (calls, usec)
}

/// `CONFIG RESETSTAT`.
pub fn reset_stats(con: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).expect("CONFIG RESETSTAT");
}
