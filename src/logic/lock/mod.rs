//! The reentrant lock (Redisson's `RLock` layout: a hash of owner -> hold count with a lease).

pub mod fair_acquire;
#[cfg(test)]
mod fair_plan_tests;
pub mod fair_plans;
pub mod fair_queue;
pub mod fair_release;
pub mod fair_scripts;
pub mod policy;
#[cfg(test)]
mod script_plan_spin_tests;
#[cfg(test)]
mod script_plan_tests;
pub mod script_plans;
pub mod scripts;
pub mod state;
