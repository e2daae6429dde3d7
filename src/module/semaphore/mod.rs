//! The semaphore with leased permits: the LOCK.SEM* commands, its place in the waiting core,
//! and the timers that return permits whose lease ended.
//!
//! - `store`: the two keys (the count `K`, the permit zset), read and written with their effects
//! - `commands`: LOCK.SEMSET / SEMACQUIRE / SEMRELEASE / SEMRENEW / SEMINFO and their rows
//! - `waiting`: the kind in the waiting core (FIFO, all-or-none grants of several permits)
//! - `leases`: a timer per semaphore at its earliest lease end, waiters or not
//! - `scripts`: Redisson's semaphore and permit-expirable semaphore scripts run natively (the
//!   decisions per script in `script_counts` and `script_permits`)

pub mod commands;
pub mod leases;
mod script_counts;
mod script_path;
mod script_permits;
pub mod scripts;
pub mod store;
pub mod waiting;
