//! The reentrant lock (Redisson's `RLock` layout: a hash of owner -> hold count with a lease).

pub mod args;
pub mod policy;
pub mod scripts;
pub mod state;
