//! Waiting, for every kind: the per-key FIFO of blocked clients and script owners' turns
//! (`queue`), and the grant rules they share (`policy`).

pub mod policy;
pub mod queue;
