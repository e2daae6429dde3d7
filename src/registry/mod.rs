//! Leaves: configs, INFO counters, command registration and docs.

pub mod cmdinfo;
pub mod config;
pub mod stats;
