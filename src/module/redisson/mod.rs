//! Redisson's lock scripts: the command filter that routes them and their native versions.

pub mod filter;
pub mod native;
