//! Safe glue: the command handlers and what they do to keys, waiters and replicas.
//!
//! - shared: `acl`, `cluster`, `effects` (every write with its replication and events), `token`,
//!   `writes` (write refusals), `wait` (blocked clients, grants, timers, events), `scripts`
//!   (the command filter of `lock.redisson-scripts native`)
//! - `commands`: the LOCK.* entry points, dispatching to a kind
//! - one folder per kind (`lock`: the reentrant lock, `rwlock`: the read-write lock,
//!   `semaphore`: the semaphore with leased permits)

pub mod acl;
pub mod cluster;
pub mod commands;
pub mod effects;
pub mod latch;
pub mod lock;
pub mod rwlock;
pub mod scripts;
pub mod semaphore;
pub mod token;
pub mod wait;
pub mod writes;
