//! Scripts run natively (`lock.redisson-scripts native`), shared by every kind: the command
//! filter that routes known scripts to LOCK.REDISSON, the LOCK.REDISSON entry point, and the one
//! interpreter of a kind's plan.

pub mod filter;
pub mod native;
pub mod plan;
