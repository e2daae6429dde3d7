//! Redisson's scripts: the command filter that routes known ones to LOCK.REDISSON.

pub mod filter;
