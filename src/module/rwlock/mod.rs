//! The read-write lock: the LOCK.* commands with `READ` / `WRITE`, and its place in the
//! waiting core.

pub mod commands;
pub mod holds;
pub mod scripts;
pub mod take;
pub mod waiting;
