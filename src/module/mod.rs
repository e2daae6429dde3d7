//! Safe glue: the command handlers and what they do to keys, waiters and replicas.

pub mod acl;
pub mod cluster;
pub mod commands;
pub mod effects;
pub mod redisson;
pub mod token;
pub mod wait;
pub mod writes;
