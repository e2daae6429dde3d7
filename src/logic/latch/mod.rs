//! The count-down latch (Redisson's `RCountDownLatch`): a string holding the count left, and
//! the script rows the module runs natively.

pub mod scripts;
