//! Pure logic: no `redis_module` import, safe Rust only, no I/O. Everything here is unit-tested
//! and fuzzed (fuzz/fuzz_targets), and public so the tests and fuzz targets can reach it.

pub mod args;
pub mod error;
pub mod fence;
pub mod grant;
pub mod queue;
pub mod redisson;
pub mod state;
pub mod timing;
