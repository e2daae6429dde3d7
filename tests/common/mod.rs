//! Test harness: real `redis-server` processes with the freshly built module.
//!
//! Each [`Server`] gets a free loopback port, its own temp dir and log file, a bounded start-up
//! that notices a crash or a failed module load, and is killed (and its dir removed) on drop,
//! even when the test panics. Safe under parallel tests (`cargo test`, `cargo nextest`).
#![allow(dead_code)]

pub mod resp;
pub mod scripts;

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module library built for this test run.
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("LOCK_MODULE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir");
    let candidates =
        [deps.join("libredis_lock.so"), deps.parent().expect("profile dir").join("libredis_lock.so")];
    for c in &candidates {
        if c.exists() {
            return c.clone();
        }
    }
    panic!("libredis_lock.so not found next to {exe:?}; run through cargo test");
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// Poll `f` until it returns `Some`, at most `limit`.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
    with_module: bool,
}

/// What to start: extra redis-server arguments, and whether to load the module.
#[derive(Clone)]
pub struct Opts {
    pub args: Vec<String>,
    pub module: bool,
    /// Extra arguments after the module path (module arguments).
    pub module_args: Vec<String>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts { args: vec![], module: true, module_args: vec![] }
    }
}

impl Opts {
    pub fn arg(mut self, a: &str) -> Self {
        self.args.extend(a.split_whitespace().map(String::from));
        self
    }
    pub fn without_module(mut self) -> Self {
        self.module = false;
        self
    }
    pub fn module_arg(mut self, a: &str) -> Self {
        self.module_args.extend(a.split_whitespace().map(String::from));
        self
    }
}

impl Server {
    pub fn start() -> Server {
        Server::start_opts(Opts::default())
    }

    pub fn start_with(args: &str) -> Server {
        Server::start_opts(Opts::default().arg(args))
    }

    pub fn start_opts(opts: Opts) -> Server {
        let dir = tempfile::Builder::new().prefix("redis-lock-test-").tempdir().expect("temp dir");
        let mut args: Vec<String> = vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--enable-debug-command".into(),
            "yes".into(),
            "--enable-module-command".into(),
            "yes".into(),
            "--daemonize".into(),
            "no".into(),
        ];
        if opts.module {
            args.push("--loadmodule".into());
            args.push(module_path().to_string_lossy().into_owned());
            args.extend(opts.module_args.iter().cloned());
        }
        args.extend(opts.args.iter().cloned());
        let mut s = Server { child: None, port: 0, dir, args, with_module: opts.module };
        s.spawn_on_free_port();
        s
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn spawn_on_free_port(&mut self) {
        for _ in 0..20 {
            self.port = free_port();
            match self.spawn() {
                Ok(()) => return,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("redis-server failed to start on port {}:\n{log}", self.port),
            }
        }
        panic!("no free port found for redis-server");
    }

    /// Start the process on `self.port` and wait until it answers PING.
    fn spawn(&mut self) -> Result<(), String> {
        let log = fs::OpenOptions::new().create(true).append(true).open(self.log_path()).expect("log file");
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("spawn redis-server (is it installed? run `make test`)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(format!("exited with {status}\n{}", self.log()));
                }
            }
            if let Ok(mut con) = self.try_conn() {
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
                match pong {
                    Ok(_) => return Ok(()),
                    Err(e) if e.to_string().contains("LOADING") => {}
                    Err(_) => {}
                }
            }
            if Instant::now() > deadline {
                return Err(format!("did not answer PING within 20 s\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let c = self.client();
        c.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// A fresh connection with a 30 s read timeout, so a missing reply fails the test.
    pub fn conn(&self) -> redis::Connection {
        let c = self.try_conn().unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.port, self.log()));
        c.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
        c
    }

    /// PID of the server process, for crash checks.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Still the same process, still answering.
    pub fn assert_alive(&mut self) {
        if let Some(c) = self.child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                panic!("redis-server exited with {status}\n{}", self.log());
            }
        }
        let pong: String = redis::cmd("PING").query(&mut self.conn()).expect("PING");
        assert_eq!(pong, "PONG");
    }

    /// SIGKILL the server.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop and start again on the same port, dir and arguments (plus `extra`).
    pub fn restart(&mut self, extra: &str) {
        self.kill();
        self.args.extend(extra.split_whitespace().map(String::from));
        if let Err(log) = self.spawn() {
            panic!("restart failed:\n{log}");
        }
    }

    /// Make this server a replica of `master` and wait for the link.
    pub fn replicate_from(&self, master: &Server) {
        let mut c = self.conn();
        let _: () =
            redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port).query(&mut c).expect("REPLICAOF");
        let ok = wait_for(Duration::from_secs(20), || {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut c).ok()?;
            info.contains("master_link_status:up").then_some(())
        });
        assert!(ok.is_some(), "replica link not up\n{}", self.log());
    }

    pub fn has_module(&self) -> bool {
        self.with_module
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- redis-server log (port {}) ----\n{}", self.port, self.log());
        }
        self.kill();
    }
}

/// `INFO lock` as (field -> value) with the `lock_` prefix removed.
pub fn lock_info(con: &mut redis::Connection) -> std::collections::HashMap<String, String> {
    let info: String = redis::cmd("INFO").arg("lock").query(con).expect("INFO lock");
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| k.strip_prefix("lock_").map(|k| (k.to_string(), v.trim().to_string())))
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

pub fn stat(con: &mut redis::Connection, name: &str) -> i64 {
    lock_info(con)
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no INFO field lock_{name}"))
}

/// Redisson's channel naming, written independently of the module: `<prefix>:{K}`, or
/// `<prefix>:K` when K already contains `{`.
pub fn prefixed(prefix: &str, key: &[u8]) -> Vec<u8> {
    let mut c = format!("{prefix}:").into_bytes();
    if key.contains(&b'{') {
        c.extend_from_slice(key);
    } else {
        c.push(b'{');
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c
}

pub const PREFIX: &str = "redisson_lock__channel";

/// The default release channel of lock `key`.
pub fn channel(key: &[u8]) -> Vec<u8> {
    prefixed(PREFIX, key)
}
