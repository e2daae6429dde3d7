//! The reentrant lock: the LOCK.* commands and the natively run Redisson lock scripts.

pub mod commands;
pub mod fair_scripts;
pub mod fair_store;
pub mod scripts;
pub mod waiting;
