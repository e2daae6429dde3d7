//! The count-down latch (Redisson's `RCountDownLatch`): its scripts run natively.

pub mod scripts;
