//! Test and benchmark support for redis-lock, shared by the module's integration tests
//! (`tests/`, through the thin `tests/common` layer) and by the benchmark (`bench/`).
//!
//! - [`server`]: real `redis-server` processes on free loopback ports, each in its own temp dir,
//!   killed on drop (and, on request, when the process that started them dies).
//! - [`resp`]: a raw RESP2/RESP3 client that sees replies exactly as the server sends them
//!   (nil vs empty, exact error text, binary strings, maps, pushes) and can wait for a reply
//!   with a deadline without losing a half-read frame; pub/sub helpers.
//! - [`info`]: `INFO` fields, `INFO lock` counters, command stats, replication offsets.
//! - [`scripts`]: our own Lua implementation of every Redisson lock script kind (`lua/<kind>.lua`)
//!   and keyspace snapshots to compare two servers.
//! - [`names`]: Redisson's channel naming, written independently of the module.
//! - [`waiters`]: blocked `LOCK.ACQUIRE ... WAIT` clients and the `INFO lock` counters.
//! - [`cmd!`]: `cmd!(conn, "LOCK.ACQUIRE", key, owner, 30000)` sends one command and returns
//!   the raw reply.

pub mod info;
pub mod names;
pub mod resp;
pub mod scripts;
pub mod server;
pub mod waiters;

pub use info::{cmdstat, cpu_seconds, info, info_int, lock_info, replica_caught_up, reset_stats, stat};
pub use names::{channel, prefixed, PREFIX};
pub use server::{free_port, module_path, raise_nofile, wait_for, Opts, Server};

/// `cmd!(conn, "LOCK.ACQUIRE", key, owner, 30000)`: send one command on a [`resp::Conn`] (every
/// argument through [`resp::Arg`]: strings, byte strings, integers) and return the raw reply.
#[macro_export]
macro_rules! cmd {
    ($c:expr, $($a:expr),+ $(,)?) => { $c.call(&[$($crate::resp::Arg::arg(&$a)),+]) };
}
