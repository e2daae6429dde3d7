//! The read-write lock (Redisson's `RReadWriteLock` layout: a hash with `mode`, a field per
//! reader and one for the writer, a timeout key per read hold).

pub mod names;
pub mod policy;
pub mod state;
