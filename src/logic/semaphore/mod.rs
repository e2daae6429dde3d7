//! The semaphore with leased permits (Redisson's `RPermitExpirableSemaphore` layout: the string
//! `K` holds the available permits, the zset `{K}:timeout` each held permit's id and lease end,
//! the channel `redisson_sc:{K}` the new count when permits return).

pub mod args;
pub mod names;
pub mod policy;
pub mod scripts;
pub mod state;
