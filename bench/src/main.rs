//! lock-bench: benchmarks for the redis-lock module, over the network only.
//!
//!   cargo run --release --manifest-path bench/Cargo.toml -- \
//!       --module /abs/path/libredis_lock.so --out bench-results [--quick]
//!
//! Starts its own redis-server with the module, runs every scenario, prints markdown tables on
//! stdout (progress goes to stderr), writes <out>/results.json, <out>/results.md and SVG charts,
//! and stops the server (also on panic).

mod charts;
mod contention;
mod cycles;
mod expiry;
mod family;
mod lua;
mod memory;
mod pipelined;
mod pubsub_wait;
mod redisson_scripts;
mod rwlock;
mod semaphore;
mod stats;
mod uncontended;

use serde::Serialize;
use stats::fmt_num as f;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A command connection to the benchmark server (60 s read timeout).
pub fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let c = client.get_connection_with_timeout(Duration::from_secs(10)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(60))).expect("read timeout");
    c
}

struct Args {
    module: PathBuf,
    out: PathBuf,
    quick: bool,
    redis_server: String,
    only: Option<Vec<String>>,
    waiters: Option<usize>,
    /// Extra redis-server arguments (`--server-arg "--enable-debug-command local"`).
    server_args: Vec<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: lock-bench --module /abs/path/libredis_lock.so [--out DIR] [--quick] \
         [--redis-server PATH] [--server-arg ARGS]... \
         [--only uncontended,cycles,contention,expiry,memory,redisson,redisson-ratios,rwlock,rwlock-ratios,semaphore,semaphore-ratios,family,family-ratios] [--waiters N (memory)]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut module = None;
    let mut out = PathBuf::from("bench-results");
    let mut quick = false;
    let mut redis_server = "redis-server".to_string();
    let mut only = None;
    let mut waiters = None;
    let mut server_args = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--module" => module = Some(PathBuf::from(it.next().unwrap_or_else(|| usage()))),
            "--out" => out = PathBuf::from(it.next().unwrap_or_else(|| usage())),
            "--quick" => quick = true,
            "--waiters" => waiters = it.next().and_then(|v| v.parse().ok()).or_else(|| usage()),
            "--redis-server" => redis_server = it.next().unwrap_or_else(|| usage()),
            "--server-arg" => server_args.push(it.next().unwrap_or_else(|| usage())),
            "--only" => {
                only = Some(it.next().unwrap_or_else(|| usage()).split(',').map(String::from).collect())
            }
            "-h" | "--help" => usage(),
            other => {
                eprintln!("unknown argument {other}");
                usage()
            }
        }
    }
    let module = module.unwrap_or_else(|| usage());
    let module = std::fs::canonicalize(&module).unwrap_or_else(|e| {
        eprintln!("module {}: {e}", module.display());
        std::process::exit(2)
    });
    Args { module, out, quick, redis_server, only, waiters, server_args }
}

#[derive(Serialize)]
struct Meta {
    quick: bool,
    module: String,
    redis_version: String,
    server_args: Vec<String>,
    cpus: usize,
    unix_time: u64,
    total_seconds: f64,
}

#[derive(Serialize)]
struct Target {
    name: String,
    required: String,
    measured: f64,
    met: bool,
    note: String,
}

#[derive(Serialize)]
struct Results {
    meta: Meta,
    uncontended: Vec<uncontended::Row>,
    uncontended_ratios: Vec<uncontended::Ratios>,
    cycles: Vec<cycles::Row>,
    contention: Vec<contention::Row>,
    expiry: Vec<expiry::Row>,
    memory: Option<memory::Report>,
    redisson: Option<redisson_scripts::Report>,
    rwlock: Vec<rwlock::Row>,
    rwlock_contended: Vec<rwlock::ContendedRow>,
    semaphore: Vec<semaphore::Row>,
    semaphore_contended: Vec<semaphore::ContendedRow>,
    family: Vec<family::Row>,
    targets: Vec<Target>,
}

fn main() {
    let args = parse_args();
    let t_start = Instant::now();
    let want = |s: &str| args.only.as_ref().is_none_or(|o| o.iter().any(|x| x == s));
    testkit::raise_nofile();
    let mut opts = testkit::Opts::default()
        .binary(&args.redis_server)
        .module_path(&args.module)
        .arg("--maxclients 20000")
        .die_with_parent();
    for a in &args.server_args {
        opts = opts.arg(a);
    }
    let mut srv = testkit::Server::start_opts(opts);
    eprintln!("redis-server on port {} with {}", srv.port, args.module.display());
    let port = srv.port;
    let mut con = connect(port);
    let redis_version = testkit::info(&mut con, "server").get("redis_version").cloned().unwrap_or_default();
    let sha = lua::load(&mut con);

    let (uncontended_rows, uncontended_ratios) =
        if want("uncontended") { uncontended::run(&mut con, &sha, args.quick) } else { (vec![], vec![]) };
    srv.assert_alive();
    let cycles_rows = if want("cycles") { cycles::run(port, &sha, args.quick) } else { vec![] };
    srv.assert_alive();
    let contention_rows = if want("contention") { contention::run(port, &sha, args.quick) } else { vec![] };
    srv.assert_alive();
    let expiry_rows = if want("expiry") { expiry::run(port, &sha, args.quick) } else { vec![] };
    srv.assert_alive();
    let memory_rep =
        if want("memory") { Some(memory::run(port, &sha, args.quick, args.waiters)) } else { None };
    srv.assert_alive();
    let redisson = if want("redisson") {
        Some(redisson_scripts::run(port, &args.redis_server, &args.module, args.quick, true))
    } else if want("redisson-ratios") {
        // Only the native vs Lua script phases (make bench-matrix, per server and config).
        Some(redisson_scripts::run(port, &args.redis_server, &args.module, args.quick, false))
    } else {
        None
    };
    srv.assert_alive();
    // "rwlock-ratios": only the uncontended LOCK.* vs Lua phases (make bench-matrix).
    let rwlock_rows = if want("rwlock") || want("rwlock-ratios") {
        rwlock::run_uncontended(&mut con, port, args.quick)
    } else {
        vec![]
    };
    let rwlock_contended = if want("rwlock") { rwlock::run_contended(port, args.quick) } else { vec![] };
    srv.assert_alive();
    // "semaphore-ratios": only the uncontended LOCK.SEM* / native vs Lua phases (bench-matrix).
    let semaphore_rows = if want("semaphore") || want("semaphore-ratios") {
        semaphore::run_uncontended(&mut con, port, args.quick)
    } else {
        vec![]
    };
    let semaphore_contended =
        if want("semaphore") { semaphore::run_contended(port, args.quick) } else { vec![] };
    srv.assert_alive();
    // "family-ratios": the same native vs Lua phases (bench-matrix); "family" has no other part.
    let family_rows = if want("family") || want("family-ratios") {
        family::run(&mut con, port, args.quick)
    } else {
        vec![]
    };
    srv.assert_alive();
    drop(con);

    let mut targets = targets(&uncontended_ratios, &contention_rows, &expiry_rows);
    if let Some(r) = &redisson {
        targets.extend(redisson_targets(r));
    }
    targets.extend(rwlock_targets(&rwlock_rows, &rwlock_contended));
    targets.extend(semaphore_targets(&semaphore_rows, &semaphore_contended));
    targets.extend(family_targets(&family_rows));
    let mut res = Results {
        meta: Meta {
            quick: args.quick,
            module: args.module.display().to_string(),
            redis_version,
            server_args: args.server_args.clone(),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            total_seconds: 0.0,
        },
        uncontended: uncontended_rows,
        uncontended_ratios,
        cycles: cycles_rows,
        contention: contention_rows,
        expiry: expiry_rows,
        memory: memory_rep,
        redisson,
        rwlock: rwlock_rows,
        rwlock_contended,
        semaphore: semaphore_rows,
        semaphore_contended,
        family: family_rows,
        targets,
    };
    drop(srv); // stop the server before writing the report
    res.meta.total_seconds = t_start.elapsed().as_secs_f64();

    let md = markdown(&res);
    print!("{md}");
    std::fs::create_dir_all(&args.out).expect("create the output dir");
    std::fs::write(args.out.join("results.md"), &md).expect("write results.md");
    std::fs::write(args.out.join("results.json"), serde_json::to_string_pretty(&res).unwrap())
        .expect("write results.json");
    for (name, svg) in charts(&res) {
        std::fs::write(args.out.join(name), svg).expect("write svg");
    }
    eprintln!(
        "wrote {}/results.json, results.md and charts ({:.0} s)",
        args.out.display(),
        res.meta.total_seconds
    );
}

fn targets(r1: &[uncontended::Ratios], r3: &[contention::Row], r4: &[expiry::Row]) -> Vec<Target> {
    let mut t = Vec::new();
    if let Some(p) = r1.iter().find(|r| r.mode == "pipelined") {
        t.push(Target {
            name: "LOCK.ACQUIRE vs Lua acquire, pipelined throughput".into(),
            required: ">= 2.5x".into(),
            measured: p.acquire_vs_lua_throughput,
            met: p.acquire_vs_lua_throughput >= 2.5,
            note: String::new(),
        });
        t.push(Target {
            name: "LOCK.ACQUIRE vs SET PX, pipelined throughput".into(),
            required: ">= 0.95x".into(),
            measured: p.acquire_vs_set_throughput,
            met: p.acquire_vs_set_throughput >= 0.95,
            note: String::new(),
        });
        t.push(Target {
            name: "LOCK.ACQUIRE vs Lua acquire, server usec/call".into(),
            required: "<= 0.33x".into(),
            measured: p.acquire_vs_lua_server_usec,
            met: p.acquire_vs_lua_server_usec <= 0.33,
            note: "commandstats usec_per_call, pipelined phase".into(),
        });
    }
    // handoffs: WAIT vs Redisson for every client count, per critical section; the worst counts
    for cs in [0u64, 1] {
        let mut worst: Option<(f64, usize)> = None;
        for w in r3
            .iter()
            .filter(|r| r.strategy == contention::Strategy::Wait.label() && r.critical_section_ms == cs)
        {
            if let Some(rd) = r3.iter().find(|r| {
                r.strategy == contention::Strategy::Redisson.label()
                    && r.clients == w.clients
                    && r.critical_section_ms == cs
            }) {
                let ratio = w.handoffs_per_sec / rd.handoffs_per_sec;
                if worst.is_none_or(|(x, _)| ratio < x) {
                    worst = Some((ratio, w.clients));
                }
            }
        }
        if let Some((ratio, n)) = worst {
            t.push(Target {
                name: format!("contended handoffs/s, WAIT vs Redisson-style, {cs} ms critical section"),
                required: ">= 3x".into(),
                measured: ratio,
                met: ratio >= 3.0,
                note: format!(
                    "worst over N = 2, 8, 32 (at N = {n}){}",
                    if cs > 0 { "; a 1 ms critical section caps any strategy near 1/cs" } else { "" }
                ),
            });
        }
    }
    let waits: Vec<&contention::Row> =
        r3.iter().filter(|r| r.strategy == contention::Strategy::Wait.label()).collect();
    if !waits.is_empty() {
        let (mut m, mut at) = (f64::INFINITY, String::new());
        for w in waits {
            if w.jain_fairness < m {
                m = w.jain_fairness;
                at = format!("worst at {} clients, {} ms critical section", w.clients, w.critical_section_ms);
            }
        }
        t.push(Target {
            name: "Jain fairness with WAIT".into(),
            required: ">= 0.99".into(),
            measured: m,
            met: m >= 0.99,
            note: at,
        });
    }
    if let Some(w) = r4.iter().find(|r| r.strategy == "LOCK.ACQUIRE WAIT") {
        t.push(Target {
            name: "expiry handoff lateness with WAIT (max over rounds, ms)".into(),
            required: "<= 5 ms".into(),
            measured: w.max_ms,
            met: w.max_ms <= 5.0,
            note: format!("median {:.2} ms over {} rounds", w.median_ms, w.rounds),
        });
    }
    t
}

fn rwlock_targets(rows: &[rwlock::Row], contended: &[rwlock::ContendedRow]) -> Vec<Target> {
    let mut t: Vec<Target> = rows
        .iter()
        .map(|r| {
            let need = if r.op.contains("10 readers") { 3.0 } else { 2.0 };
            Target {
                name: format!("LOCK.* {} vs Lua, pipelined throughput", r.op),
                required: format!(">= {need}x"),
                measured: r.ratio,
                met: r.ratio >= need,
                note: String::new(),
            }
        })
        .collect();
    if let [wait, pubsub] = contended {
        t.push(Target {
            name: "rwlock contended (8 readers, 2 writers): worst role's wait p99, WAIT vs pub/sub".into(),
            required: "< 1x".into(),
            measured: wait.worst_role_p99_ms / pubsub.worst_role_p99_ms,
            met: wait.worst_role_p99_ms < pubsub.worst_role_p99_ms && wait.exclusion_violations == 0,
            note: format!(
                "read p99 {:.2} vs {:.2} ms, write p99 {:.2} vs {:.2} ms (waits cut off by the end counted as long as they lasted)",
                wait.read_wait_ms.p99, pubsub.read_wait_ms.p99, wait.write_wait_ms.p99, pubsub.write_wait_ms.p99
            ),
        });
        t.push(Target {
            name: "rwlock contended: writers not starved (write grants, WAIT vs pub/sub)".into(),
            required: "more".into(),
            measured: wait.write_grants as f64 / (pubsub.write_grants.max(1) as f64),
            met: wait.write_grants > pubsub.write_grants,
            note: format!("{} vs {}", wait.write_grants, pubsub.write_grants),
        });
    }
    t
}

fn semaphore_targets(rows: &[semaphore::Row], contended: &[semaphore::ContendedRow]) -> Vec<Target> {
    let mut t: Vec<Target> = rows
        .iter()
        .map(|r| {
            let need = if r.kind.starts_with("LOCK") { 2.0 } else { 1.8 };
            Target {
                name: format!("semaphore {} ({}), pipelined throughput", r.op, r.kind),
                required: format!(">= {need}x"),
                measured: r.ratio,
                met: r.ratio >= need && r.unexpected_replies == 0,
                note: format!("server usec {:.2} vs {:.2}", r.fast_server_usec, r.lua_server_usec),
            }
        })
        .collect();
    if let [wait, pubsub] = contended {
        t.push(Target {
            name: "semaphore contended (16 clients, 4 permits): wait p99, WAIT vs pub/sub".into(),
            required: "< 1x".into(),
            measured: wait.wait_ms.p99 / pubsub.wait_ms.p99,
            met: wait.wait_ms.p99 < pubsub.wait_ms.p99 && wait.max_out <= 4 && pubsub.max_out <= 4,
            note: format!(
                "p50 {:.2} vs {:.2} ms, p99 {:.2} vs {:.2} ms, grants {} vs {}, most permits out {} / {}",
                wait.wait_ms.p50,
                pubsub.wait_ms.p50,
                wait.wait_ms.p99,
                pubsub.wait_ms.p99,
                wait.grants,
                pubsub.grants,
                wait.max_out,
                pubsub.max_out
            ),
        });
    }
    t
}

fn family_targets(rows: &[family::Row]) -> Vec<Target> {
    rows.iter()
        .filter(|r| r.kind != "reference")
        .map(|r| Target {
            // Every natively run family script >= 1.8x its script in Lua.
            name: format!("{} ({}), native vs Lua, pipelined throughput", r.op, r.script),
            required: ">= 1.8x".into(),
            measured: r.ratio,
            met: r.ratio >= 1.8 && r.unexpected_replies == 0,
            note: format!("server usec {:.2} vs {:.2}", r.native_server_usec, r.lua_server_usec),
        })
        .collect()
}

fn redisson_targets(r: &redisson_scripts::Report) -> Vec<Target> {
    let mut t = Vec::new();
    for x in &r.ratios {
        // A read unlock with 10 readers holding: >= 3x (family.md section 14).
        let want = if x.op == redisson_scripts::RW_OPS[4] { 3.0 } else { 1.8 };
        t.push(Target {
            name: format!("Redisson {} via EVALSHA, native vs Lua, throughput", x.op),
            required: format!(">= {want}x"),
            measured: x.throughput,
            met: x.throughput >= want,
            note: "batches of 32, 4 unanswered, same script".into(),
        });
        t.push(Target {
            name: format!("Redisson {} via EVALSHA, native vs Lua, server usec/call", x.op),
            required: "<= 0.45x".into(),
            measured: x.server_usec,
            met: x.server_usec <= 0.45,
            note: "lock.redisson vs evalsha usec_per_call".into(),
        });
    }
    if let Some(f) = r.fairness.iter().find(|f| f.mode == "native") {
        t.push(Target {
            name: "Jain fairness, 4 Redisson-style + 4 WAIT clients, native".into(),
            required: ">= 0.9".into(),
            measured: f.jain,
            met: f.jain >= 0.9,
            note: format!("WAIT {:?}, Redisson-style {:?}", f.wait_grants, f.script_grants),
        });
    }
    t
}

fn redisson_markdown(s: &mut String, r: &redisson_scripts::Report) {
    let _ = writeln!(s, "## Redisson's lock scripts run natively (`lock.redisson-scripts`)\n");
    let _ = writeln!(s, "The same script sent with EVALSHA (our own implementation of each Redisson script, registered with `lock.redisson-extra-scripts`, so it takes the path of Redisson's SHA1s), run in Lua (`lua`) and natively (`native`) on one server, switched at run time; batches of 32 with up to 4 unanswered (the server kept busy), median of the repetitions (ratios: median of the paired ratios). Server µs/call: `evalsha` vs `lock.redisson` usec_per_call.\n");
    let _ = writeln!(s, "| script | mode | calls/s | server µs/call |");
    let _ = writeln!(s, "|---|---|---:|---:|");
    for x in &r.rows {
        let _ =
            writeln!(s, "| {} | {} | {} | {:.2} |", x.op, x.mode, f(x.ops_per_sec), x.server_usec_per_call);
    }
    let _ = writeln!(s, "\n| script | native/Lua calls/s | native/Lua server µs |");
    let _ = writeln!(s, "|---|---:|---:|");
    for x in &r.ratios {
        let _ = writeln!(s, "| {} | {:.2}x | {:.2}x |", x.op, x.throughput, x.server_usec);
    }
    let _ = writeln!(s, "\nEvery other command: `SET k v` (pipeline 32) with the filter not installed (`lua`) and installed (`native`).\n");
    let _ = writeln!(s, "| filter | SET ops/s | instructions per SET inside processCommand() (callgrind, two server processes) |");
    let _ = writeln!(s, "|---|---:|---:|");
    for (m, v) in &r.set_ops {
        let ins: Vec<String> =
            r.set_instructions.iter().filter(|(x, _)| x == m).map(|(_, n)| format!("{n:.0}")).collect();
        let ins = if ins.is_empty() { "-".to_string() } else { ins.join(" / ") };
        let _ = writeln!(s, "| {m} | {} | {ins} |", f(*v));
    }
    let _ = writeln!(s, "\nSET throughput difference, on vs off: {:+.1}%.\n", r.set_diff_pct);
    let _ = writeln!(s, "Mixed fleet on one lock: 4 Redisson-style clients (acquire script; on failure wait for the release message or the PTTL; unlock script + latch DEL) and 4 `LOCK.ACQUIRE ... WAIT` clients, 1 ms critical sections.\n");
    let _ = writeln!(s, "| mode | WAIT clients' grants | Redisson-style clients' grants | Jain fairness |");
    let _ = writeln!(s, "|---|---|---|---:|");
    for x in &r.fairness {
        let _ = writeln!(s, "| {} | {:?} | {:?} | {:.3} |", x.mode, x.wait_grants, x.script_grants, x.jain);
    }
    let _ = writeln!(s);
}

fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let _ = writeln!(
        s,
        "# redis-lock benchmark{}\n",
        if m.quick { " (--quick: tiny runs, numbers are noisy)" } else { "" }
    );
    let _ = writeln!(
        s,
        "redis-server {} on 127.0.0.1, {} CPUs shared by server and clients, no persistence. Total {:.0} s.\n",
        m.redis_version, m.cpus, m.total_seconds
    );
    if !r.uncontended.is_empty() {
        let _ = writeln!(
            s,
            "## 1. Uncontended cost and throughput (one connection, every acquire creates a lock)\n"
        );
        let _ = writeln!(s, "ops/s: one connection, commands packed in advance, median of the repetitions. Server µs/call: `usec_per_call` from INFO commandstats (CONFIG RESETSTAT before each phase) of the top-level command (lock.acquire, evalsha, set, lock.release, del). Server CPU µs/op: Δ(used_cpu_user + used_cpu_sys) / ops, so it includes networking and parsing. Lua = our implementation of Redisson's RLock scripts sent with EVALSHA; the 3.24+ unlock writes an idempotency latch key that the client then DELs: that DEL is in its ops/s, not in its µs/call. SET/DEL are the floor (no ownership, no reentrancy, no notification).\n");
        let _ = writeln!(s, "| op | implementation | mode | ops/s | server µs/call | server CPU µs/op |");
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|");
        for x in &r.uncontended {
            let mode = if x.pipeline > 1 { format!("pipeline {}", x.pipeline) } else { "unpipelined".into() };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | {:.2} |{}",
                x.op,
                x.implementation,
                mode,
                f(x.ops_per_sec),
                x.server_usec_per_call,
                x.server_cpu_usec_per_op,
                if x.unexpected_replies > 0 {
                    format!(" ⚠ {} unexpected replies", x.unexpected_replies)
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(s, "\n| mode | ACQUIRE/Lua ops/s | ACQUIRE/SET ops/s | ACQUIRE/Lua server µs | ACQUIRE/Lua server CPU | RELEASE/Lua ops/s | RELEASE/Lua(no latch) ops/s | RELEASE/DEL ops/s | RELEASE/Lua(no latch) server µs |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for x in &r.uncontended_ratios {
            let _ = writeln!(
                s,
                "| {} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
                x.mode,
                x.acquire_vs_lua_throughput,
                x.acquire_vs_set_throughput,
                x.acquire_vs_lua_server_usec,
                x.acquire_vs_lua_server_cpu,
                x.release_vs_lua_throughput,
                x.release_vs_lua_no_latch_throughput,
                x.release_vs_del_throughput,
                x.release_vs_lua_server_usec
            );
        }
        let _ = writeln!(s);
    }
    if !r.cycles.is_empty() {
        let _ = writeln!(
            s,
            "## 2. Full lock cycles (acquire + release, one connection and one lock per thread)\n"
        );
        let _ = writeln!(s, "A cycle is acquire + release, each a blocking round trip (the Redisson cycle also sends the latch DEL without waiting, as Redisson does). Latency = one whole cycle.\n");
        let _ =
            writeln!(s, "| threads | implementation | cycles/s | native/Lua | cycle p50 µs | cycle p99 µs |");
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|");
        for x in &r.cycles {
            let other =
                r.cycles.iter().find(|o| o.threads == x.threads && o.implementation != x.implementation);
            let ratio = if x.implementation.starts_with("LOCK") {
                other.map(|o| format!("{:.2}x", x.cycles_per_sec / o.cycles_per_sec)).unwrap_or_default()
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |{}",
                x.threads,
                x.implementation,
                f(x.cycles_per_sec),
                ratio,
                f(x.latency_us.p50),
                f(x.latency_us.p99),
                if x.unexpected_replies > 0 {
                    format!(" ⚠ {} unexpected", x.unexpected_replies)
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(s);
    }
    if !r.contention.is_empty() {
        let secs = r.contention[0].seconds;
        let _ = writeln!(s, "## 3. Contention: N clients on one lock, {secs} s per run\n");
        let _ = writeln!(s, "Strategies: `LOCK.ACQUIRE k owner 30000 WAIT <time left>` + LOCK.RELEASE; Redisson RLock.lock() (acquire script; on failure SUBSCRIBE, acquire again, then wait for a message or the returned PTTL and retry; UNSUBSCRIBE without waiting; unlock script that publishes `0`); polling = LOCK.ACQUIRE without WAIT every 100 ms (redis-py's Lock default) + LOCK.RELEASE. Critical section 1 ms = thread::sleep(1 ms).\n");
        let _ = writeln!(s, "Handoff = a grant to a different client than the previous holder; a grant also counts a client re-taking the lock it just released.\n");
        let _ = writeln!(s, "| clients | critical section | strategy | grants/s | handoffs/s | handoffs vs Redisson | per-client grants min / max | Jain fairness | commands sent per grant |");
        let _ = writeln!(s, "|---:|---:|---|---:|---:|---:|---:|---:|---:|");
        for x in &r.contention {
            let rd = r.contention.iter().find(|o| {
                o.strategy == contention::Strategy::Redisson.label()
                    && o.clients == x.clients
                    && o.critical_section_ms == x.critical_section_ms
            });
            let ratio =
                rd.map(|o| format!("{:.2}x", x.handoffs_per_sec / o.handoffs_per_sec)).unwrap_or_default();
            let _ = writeln!(
                s,
                "| {} | {} ms | {} | {} | {} | {} | {} / {} | {:.3} | {:.1} |{}",
                x.clients,
                x.critical_section_ms,
                x.strategy,
                f(x.grants_per_sec),
                f(x.handoffs_per_sec),
                ratio,
                x.per_client_min,
                x.per_client_max,
                x.jain_fairness,
                x.commands_per_grant,
                if x.unexpected_replies > 0 {
                    format!(" ⚠ {} unexpected", x.unexpected_replies)
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(s, "\nWait = from the start of an acquire attempt to its grant. Waits still open at the end of the run are cut off and listed apart. Idle gap = next grant minus the previous holder's release reply (negative: the grant arrived before the releaser's own reply).\n");
        let _ = writeln!(s, "| clients | critical section | strategy | wait p50 ms | wait p99 ms | wait max ms | cut off at end (longest ms) | idle gap p50 µs | idle gap p99 µs |");
        let _ = writeln!(s, "|---:|---:|---|---:|---:|---:|---:|---:|---:|");
        for x in &r.contention {
            let _ = writeln!(
                s,
                "| {} | {} ms | {} | {} | {} | {} | {} ({}) | {} | {} |",
                x.clients,
                x.critical_section_ms,
                x.strategy,
                f(x.wait_ms.p50),
                f(x.wait_ms.p99),
                f(x.wait_ms.max),
                x.waits_cut_off,
                f(x.longest_cut_off_ms),
                f(x.idle_gap_us.p50),
                f(x.idle_gap_us.p99),
            );
        }
        let _ = writeln!(s);
    }
    if !r.expiry.is_empty() {
        let _ = writeln!(s, "## 4. Expiry handoff: holder never releases (lease 200 ms), one waiter\n");
        let _ = writeln!(s, "Lateness = the waiter's grant time (SystemTime) minus the deadline read with PEXPIRETIME right after the holder's acquire. Redis expires a key once now > deadline, at millisecond resolution. The waiter starts at a random point of a 100 ms period.\n");
        let _ = writeln!(s, "| strategy | rounds | median late ms | max late ms | min late ms |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for x in &r.expiry {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.2} |",
                x.strategy, x.rounds, x.median_ms, x.max_ms, x.min_ms
            );
        }
        let _ = writeln!(s);
    }
    if let Some(x) = &r.memory {
        let _ = writeln!(s, "## 5. Memory\n");
        if m.quick {
            let _ = writeln!(s, "(--quick does not wait for client buffers to settle: the per-connection numbers are meaningless here.)\n");
        }
        let _ = writeln!(s, "| measure | LOCK.ACQUIRE | Lua acquire | HSET + PEXPIRE |");
        let _ = writeln!(s, "|---|---:|---:|---:|");
        let _ = writeln!(
            s,
            "| MEMORY USAGE of one lock (bytes) | {} | {} | {} |",
            x.memory_usage_lock_acquire, x.memory_usage_lua_acquire, x.memory_usage_hset
        );
        let _ = writeln!(
            s,
            "| used_memory per lock over {} locks (bytes) | {:.1} | {:.1} | {:.1} |",
            x.locks_counted,
            x.used_memory_per_lock_acquire,
            x.used_memory_per_lua_acquire,
            x.used_memory_per_hset_pexpire
        );
        let _ = writeln!(s, "\n| measure | bytes |");
        let _ = writeln!(s, "|---|---:|");
        let _ = writeln!(
            s,
            "| used_memory per idle connection ({} connections) | {:.0} |",
            x.waiters, x.used_memory_per_idle_connection
        );
        let _ = writeln!(
            s,
            "| used_memory per blocked WAIT client, over the same connection idle ({} waiters; blocked_clients seen {}, LOCK.INFO waiters {}) | {:.0} |",
            x.waiters, x.blocked_clients_seen, x.lock_info_waiters_seen, x.used_memory_per_blocked_waiter
        );
        let _ = writeln!(
            s,
            "| used_memory per waiter still held after the waiters disconnected (settled, up to 60 s; relative to before their connections) | {:.0} |",
            x.used_memory_per_waiter_after_leaving
        );
        let _ = writeln!(
            s,
            "| used_memory per blocked BLPOP client, same method (Redis's own blocking, baseline) | {:.0} |",
            x.used_memory_per_blocked_blpop
        );
        let _ = writeln!(s);
    }
    if let Some(x) = &r.redisson {
        redisson_markdown(&mut s, x);
    }
    if !r.rwlock.is_empty() || !r.rwlock_contended.is_empty() {
        s.push_str(&rwlock::markdown(&r.rwlock, &r.rwlock_contended));
    }
    if !r.semaphore.is_empty() || !r.semaphore_contended.is_empty() {
        s.push_str(&semaphore::markdown(&r.semaphore, &r.semaphore_contended));
    }
    if !r.family.is_empty() {
        s.push_str(&family::markdown(&r.family));
    }
    if !r.targets.is_empty() {
        let _ = writeln!(s, "## Targets (informational, never asserted)\n");
        let _ = writeln!(s, "| target | required | measured | met | note |");
        let _ = writeln!(s, "|---|---|---:|---|---|");
        for t in &r.targets {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {} | {} |",
                t.name,
                t.required,
                t.measured,
                if t.met { "yes" } else { "**no**" },
                t.note
            );
        }
        let _ = writeln!(s);
    }
    s
}

fn charts(r: &Results) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if !r.uncontended.is_empty() {
        let series = vec![
            "native LOCK.*".to_string(),
            "Redisson Lua (3.24+, latch)".to_string(),
            "Redisson Lua, no latch (3.22)".to_string(),
            "plain SET PX / DEL".to_string(),
        ];
        let pick = |op: &str, mode_pipe: bool, v: &dyn Fn(&uncontended::Row) -> f64| -> Vec<f64> {
            let find = |imp: &str| {
                r.uncontended
                    .iter()
                    .find(|x| {
                        x.op == op && (x.pipeline > 1) == mode_pipe && x.implementation.starts_with(imp)
                    })
                    .map(v)
                    .unwrap_or(f64::NAN)
            };
            if op == "acquire" {
                vec![find("LOCK."), find("Lua acquire"), f64::NAN, find("SET")]
            } else {
                vec![find("LOCK."), find("Lua unlock +"), find("Lua unlock, no"), find("DEL")]
            }
        };
        let groups = |v: &dyn Fn(&uncontended::Row) -> f64| {
            vec![
                ("acquire, pipeline 32".to_string(), pick("acquire", true, v)),
                ("release, pipeline 32".to_string(), pick("release", true, v)),
                ("acquire, unpipelined".to_string(), pick("acquire", false, v)),
                ("release, unpipelined".to_string(), pick("release", false, v)),
            ]
        };
        out.push((
            "throughput.svg",
            charts::render(&charts::Chart {
                title: "Uncontended throughput, one connection (ops/s, higher is better)",
                y_label: "ops/s",
                series: series.clone(),
                groups: groups(&|x| x.ops_per_sec),
                log_y: false,
            }),
        ));
        out.push((
            "server_cost.svg",
            charts::render(&charts::Chart {
                title: "Server time per call, INFO commandstats (µs, lower is better)",
                y_label: "usec_per_call",
                series,
                groups: groups(&|x| x.server_usec_per_call),
                log_y: false,
            }),
        ));
    }
    if !r.cycles.is_empty() {
        let groups = [1usize, 8, 32]
            .iter()
            .map(|&t| {
                let v = |p: &str| {
                    r.cycles
                        .iter()
                        .find(|x| x.threads == t && x.implementation.starts_with(p))
                        .map(|x| x.cycles_per_sec)
                        .unwrap_or(f64::NAN)
                };
                (format!("{t} thread{}", if t > 1 { "s" } else { "" }), vec![v("LOCK"), v("Redisson")])
            })
            .collect();
        out.push((
            "cycles.svg",
            charts::render(&charts::Chart {
                title: "Uncontended lock cycles (acquire + release) per second",
                y_label: "cycles/s",
                series: vec!["LOCK.ACQUIRE + LOCK.RELEASE".into(), "Redisson Lua".into()],
                groups,
                log_y: false,
            }),
        ));
    }
    if !r.contention.is_empty() {
        let strategies =
            [contention::Strategy::Wait, contention::Strategy::Redisson, contention::Strategy::Polling];
        let mut groups = Vec::new();
        let mut fair = Vec::new();
        for cs in [0u64, 1] {
            for n in [2usize, 8, 32] {
                let rows: Vec<Option<&contention::Row>> = strategies
                    .iter()
                    .map(|st| {
                        r.contention.iter().find(|x| {
                            x.strategy == st.label() && x.clients == n && x.critical_section_ms == cs
                        })
                    })
                    .collect();
                let label = format!("N={n}, cs {cs} ms");
                groups.push((
                    label.clone(),
                    rows.iter().map(|x| x.map_or(f64::NAN, |x| x.handoffs_per_sec)).collect(),
                ));
                fair.push((label, rows.iter().map(|x| x.map_or(f64::NAN, |x| x.jain_fairness)).collect()));
            }
        }
        let series: Vec<String> = strategies.iter().map(|s| s.label().to_string()).collect();
        out.push((
            "contention.svg",
            charts::render(&charts::Chart {
                title: "Contended handoffs per second, N clients on one lock",
                y_label: "handoffs/s",
                series: series.clone(),
                groups,
                log_y: true,
            }),
        ));
        out.push((
            "fairness.svg",
            charts::render(&charts::Chart {
                title: "Jain's fairness index of per-client acquisitions (1 = even)",
                y_label: "Jain index",
                series,
                groups: fair,
                log_y: false,
            }),
        ));
    }
    out
}
