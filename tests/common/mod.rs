//! The integration tests' view of `testkit` (the repository's test harness crate): real
//! `redis-server` processes with the freshly built module, the raw RESP client (`resp`), our
//! Lua scripts (`scripts`), INFO helpers and Redisson's channel naming. Only re-exports, so the
//! tests keep their `common::...` paths; the code lives in `testkit/`.
#![allow(dead_code, unused_imports)]

pub use testkit::{
    channel, info_int, lock_info, module_path, prefixed, replica_caught_up, stat, wait_for, Opts, Server,
    PREFIX,
};
pub use testkit::{resp, scripts, waiters};
