//! Real `redis-server` processes, by default with the freshly built module.
//!
//! Each [`Server`] gets a free loopback port, its own temp dir and log file, a bounded start-up
//! that notices a crash or a failed module load (the server exits when `--loadmodule` fails),
//! and is killed (and its dir removed) on drop, even when the caller panics. With
//! [`Opts::die_with_parent`] the kernel also kills it when the starting process dies, even by
//! SIGKILL. Safe under parallel tests (`cargo test`, `cargo nextest`).

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module library built for this test run: `$LOCK_MODULE`, else `libredis_lock.so` next to
/// the running test executable (`target/<profile>/deps/` or `target/<profile>/`).
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
    panic!("libredis_lock.so not found next to {exe:?}; run through cargo test or set LOCK_MODULE");
}

/// A loopback port that was free a moment ago (the server start retries if it is taken since).
pub fn free_port() -> u16 {
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

/// Raise this process's open-files limit to its hard limit (thousands of client connections); a
/// server started afterwards as our child inherits it.
pub fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// What to start.
#[derive(Clone)]
pub struct Opts {
    /// Extra redis-server arguments.
    pub args: Vec<String>,
    /// Load the module.
    pub module: bool,
    /// Extra arguments after the module path (module arguments).
    pub module_args: Vec<String>,
    /// The module library; [`module_path`] when `None`.
    pub module_path: Option<PathBuf>,
    /// The server executable; `redis-server` on `PATH` when `None`.
    pub binary: Option<PathBuf>,
    /// Have the kernel kill the server when the process that started it dies (PR_SET_PDEATHSIG).
    pub die_with_parent: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            args: vec![],
            module: true,
            module_args: vec![],
            module_path: None,
            binary: None,
            die_with_parent: false,
        }
    }
}

impl Opts {
    /// Extra server arguments, split on whitespace (`"--appendonly yes"`).
    pub fn arg(mut self, a: &str) -> Self {
        self.args.extend(a.split_whitespace().map(String::from));
        self
    }
    pub fn without_module(mut self) -> Self {
        self.module = false;
        self
    }
    /// Module arguments, split on whitespace (`"publish-mode global"`).
    pub fn module_arg(mut self, a: &str) -> Self {
        self.module_args.extend(a.split_whitespace().map(String::from));
        self
    }
    pub fn module_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.module_path = Some(p.into());
        self
    }
    pub fn binary(mut self, p: impl Into<PathBuf>) -> Self {
        self.binary = Some(p.into());
        self
    }
    pub fn die_with_parent(mut self) -> Self {
        self.die_with_parent = true;
        self
    }
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    binary: PathBuf,
    args: Vec<String>,
    with_module: bool,
    die_with_parent: bool,
}

impl Server {
    pub fn start() -> Server {
        Server::start_opts(Opts::default())
    }

    /// With extra server arguments, split on whitespace.
    pub fn start_with(args: &str) -> Server {
        Server::start_opts(Opts::default().arg(args))
    }

    pub fn start_opts(opts: Opts) -> Server {
        let dir = tempfile::Builder::new().prefix("redis-lock-test-").tempdir().expect("temp dir");
        let mut args: Vec<String> = [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--enable-debug-command",
            "yes",
            "--enable-module-command",
            "yes",
            "--daemonize",
            "no",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        if opts.module {
            args.push("--loadmodule".into());
            let path = opts.module_path.clone().unwrap_or_else(module_path);
            args.push(path.to_string_lossy().into_owned());
            args.extend(opts.module_args.iter().cloned());
        }
        args.extend(opts.args.iter().cloned());
        let mut s = Server {
            child: None,
            port: 0,
            dir,
            binary: opts.binary.unwrap_or_else(|| PathBuf::from("redis-server")),
            args,
            with_module: opts.module,
            die_with_parent: opts.die_with_parent,
        };
        s.spawn_on_free_port();
        s
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything the server wrote so far (stdout and stderr).
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
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log);
        if self.die_with_parent {
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?} (is it installed? run `make test`): {e}", self.binary));
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
                // LOADING and other errors: not ready yet. A server that answers must be ours:
                // another process may have taken the port between `free_port` and our bind (our
                // child then exits with "Address already in use", seen on the next turn).
                if redis::cmd("PING").query::<String>(&mut con).is_ok() && self.answers_as_child(&mut con) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("did not answer PING within 20 s\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the server on our port is our child process (`INFO server` `process_id`).
    fn answers_as_child(&self, con: &mut redis::Connection) -> bool {
        let Some(pid) = self.child.as_ref().map(std::process::Child::id) else { return false };
        let info: String = redis::cmd("INFO").arg("server").query(con).unwrap_or_default();
        info.lines().any(|l| l.trim() == format!("process_id:{pid}"))
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

    /// A fresh connection with a 30 s read timeout, so a missing reply fails the caller.
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

    /// A one-node cluster (every slot on this node, `cluster_state:ok`), with `extra` arguments.
    pub fn start_cluster_node(extra: &str) -> Server {
        let s =
            Server::start_with(&format!("--cluster-enabled yes --cluster-config-file nodes.conf {extra}"));
        let mut c = s.conn();
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(0)
            .arg(16383)
            .query(&mut c)
            .expect("ADDSLOTSRANGE");
        let ok = wait_for(Duration::from_secs(20), || {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).ok()?;
            info.contains("cluster_state:ok").then_some(())
        });
        assert!(ok.is_some(), "cluster did not reach cluster_state:ok\n{}", s.log());
        s
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
