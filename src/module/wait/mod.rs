//! Server-side FIFO waiting, written once for every kind: blocked `LOCK.* ... WAIT` clients,
//! script owners' turns, and the handoff of an object that becomes available.
//!
//! Clients block with a raw `RM_BlockClient` (no Redis timeout); their wait timeout runs on a
//! module timer so it is exact, and a grant never reaches a client whose deadline passed.
//! Frees that do not go through a LOCK.* release are noticed three ways: a timer armed at the
//! holder's lease deadline, keyspace events on keys that have waiters, and the FLUSHDB/FLUSHALL
//! server event. Those paths write from a 0 ms timer, never inside the event callback.
//!
//! - `kind`: what a kind provides ([`Kind`]: its table, its key's look, one grant, replies)
//! - `table`: a kind's waiter table, its gauges, the admission bounds
//! - `join`: blocking a client, its wait timeout
//! - `grants`: serving a line (the kind's policy decides, the kind writes), turns, the timers
//!   and deferrals that bring a key back
//! - `callbacks`: how a wait ends (reply, CLIENT UNBLOCK, disconnect)
//! - `events`: keyspace, flush, swapdb and role events, over every kind

pub mod callbacks;
pub mod events;
pub mod grants;
pub mod join;
pub mod kind;
pub mod table;

pub use events::{
    can_unload, init, loaded, on_flush, on_loading, on_role_change, on_swapdb, ops, reset, Ops,
};
pub use grants::{grant_head, queue_turn, turn, Turn};
pub use join::{block, has_waiters, waiting_on, waiting_split, waiting_sum};
pub use kind::{Grant, Kind, Look};
pub use table::{admit, Table};
