//! Leaves: configs, INFO counters, the type of a command's table row (the rows sit beside
//! their handlers).

pub mod cmdinfo;
pub mod config;
pub mod stats;
