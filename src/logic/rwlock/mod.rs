//! The read-write lock (Redisson's `RReadWriteLock` layout: a hash with `mode`, a field per
//! reader and one for the writer, a timeout key per read hold).

pub mod names;
pub mod policy;
#[cfg(test)]
mod script_plan_tests;
pub mod script_plans;
mod script_renewals;
mod script_steps;
mod script_unlocks;
pub mod scripts;
pub mod state;
