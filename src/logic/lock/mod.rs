//! The reentrant lock (Redisson's `RLock` layout: a hash of owner -> hold count with a lease).

pub mod policy;
#[cfg(test)]
mod script_plan_tests;
pub mod script_plans;
pub mod scripts;
pub mod state;
