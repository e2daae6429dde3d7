//! The boundary with the server: raw module API calls, `unsafe`, `extern "C"` callbacks.

pub mod acl;
pub mod blocked;
pub mod call;
pub mod command;
pub mod command_info;
pub mod configs;
pub mod events;
pub mod filter;
pub mod info;
pub mod key;
pub mod list;
pub mod luanum;
pub mod replicate;
pub mod replication;
pub mod rm;
pub mod timers;
