//! Pure logic: no `redis_module` import, safe Rust only, no I/O. Everything here is unit-tested
//! and fuzzed (fuzz/fuzz_targets), and public so the tests and fuzz targets can reach it.
//!
//! - shared by every kind: `args` (integers, deadlines, derived names), `error`, `fence`
//!   (fencing tokens), `timing` (timer periods), `wait` (the waiter queue and the grant rules
//!   every kind shares: FIFO, timeouts, script owners' turns), `scripts` (script rows, the
//!   table of known scripts, the one parser of a call), `plan` (a natively run script's path
//!   as data), `kinds` (every kind's script operations and rows, in one list)
//! - one folder per kind (`lock`: the reentrant lock): its arguments, its transitions, its
//!   grant policy, its Redisson script rows and their plans

pub mod args;
pub mod command_args;
pub mod error;
pub mod fence;
pub mod kinds;
pub mod latch;
pub mod lock;
pub mod plan;
pub mod rwlock;
pub mod script_cmds;
pub mod script_layout;
pub mod script_table;
pub mod scripts;
pub mod semaphore;
pub mod timing;
pub mod wait;
