//! The benchmark's own redis-server: free loopback port, no persistence, the module loaded.
//! Killed on drop (normal exit and panics) and, through PR_SET_PDEATHSIG, when this process dies.

use std::collections::HashMap;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// Raise our own open-files limit to the hard limit (2 000+ waiter connections); the server,
/// started as our child, inherits it.
pub fn raise_nofile() {
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

impl Server {
    pub fn start(redis_bin: &str, module: &Path) -> Server {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("lock-bench-{}-{}", std::process::id(), port));
        std::fs::create_dir_all(&dir).expect("create the server's temp dir");
        let log = dir.join("redis.log");
        let mut cmd = Command::new(redis_bin);
        cmd.arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--maxclients")
            .arg("20000")
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(&log)
            .arg("--daemonize")
            .arg("no")
            .arg("--loadmodule")
            .arg(module)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        unsafe {
            cmd.pre_exec(|| {
                // The server dies with us, even on SIGKILL of the benchmark.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {redis_bin}: {e}"));
        let mut s = Server { child, port, dir };
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = s.child.try_wait() {
                panic!("redis-server exited during start-up ({status}); log:\n{}", s.log());
            }
            if let Ok(mut c) = s.try_conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    let modules: redis::Value =
                        redis::cmd("MODULE").arg("LIST").query(&mut c).expect("MODULE LIST");
                    if !format!("{modules:?}").contains("lock") {
                        panic!("module `lock` is not loaded: {modules:?}\n{}", s.log());
                    }
                    return s;
                }
            }
            if Instant::now() > end {
                panic!("redis-server did not answer within 15 s; log:\n{}", s.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("redis-server died ({status}); log:\n{}", self.log());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `INFO <section>` as a field -> value map.
pub fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

pub fn info_i64(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    info(con, section)
        .get(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no integer field {field}"))
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

pub fn reset_stats(con: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).expect("CONFIG RESETSTAT");
}
