//! What a kind gives the waiting core: its table, what its key looks like to a round, how one
//! grant is written, and its replies. One implementation per kind (`module/<kind>/waiting.rs`).

use super::table::Table;
use crate::ffi::key::Key;
use crate::ffi::rm::{Ctx, RStr};
use crate::logic::error::Error;
use crate::logic::wait::policy::Policy;
use crate::module::acl::WaiterUser;
use crate::registry::stats::KindStats;

/// A kind's request (what a waiter asks for).
pub type Req<K> = <<K as Kind>::Policy as Policy>::Request;

/// What a kind's key looks like to the waiting core.
pub enum Look<V> {
    /// Waiters may be granted: the policy's view of the key (e.g. a free lock).
    Open(V),
    /// Some waiters may be granted beside the current holders (readers beside readers): the
    /// policy's view, and when the current holds end (a timer is armed for it).
    Shared(V, Option<i64>),
    /// Nothing to grant until the key changes; `Some(deadline)`: its lease ends then (unix ms),
    /// and a timer is armed for it.
    Held(Option<i64>),
    /// A key of another type: every waiter fails with WRONGTYPE.
    WrongType,
}

/// One grant to write: the policy's decision for the waiter at the head.
pub struct Grant<'a, K: Kind> {
    pub key: &'a Key,
    pub name: RStr,
    /// The key's name, as bytes.
    pub lock: &'a [u8],
    pub owner: &'a [u8],
    pub req: &'a Req<K>,
    pub grant: <K::Policy as Policy>::Grant,
    /// The first grant of this round (the key was free before it).
    pub first: bool,
    pub now: i64,
    /// The waiter's user as remembered when it blocked, where the server re-checks blocked
    /// commands' permissions (see `acl::waiter_may_take`).
    pub who: Option<WaiterUser>,
}

pub trait Kind: Sized + 'static {
    type Policy: Policy<Request: Send + Clone + 'static>;
    /// What a granted waiter is replied (e.g. its fencing token).
    type Granted: 'static;
    /// The kind's waiter table (a `static`).
    fn table() -> &'static Table<Self::Policy>;
    /// The kind's own waiting counters (INFO; the `waits_*` fields are their sums).
    fn stats() -> &'static KindStats;
    /// What the key `name` (open for writing) looks like now.
    fn look(ctx: Ctx, key: &Key, name: RStr) -> Look<<Self::Policy as Policy>::View>;
    /// Write one grant: first what only the server can check (ACL, a token key), then the
    /// effects. An `Err` is the waiter's error reply; nothing was written for it.
    fn apply(ctx: Ctx, g: Grant<'_, Self>) -> Result<Self::Granted, Error>;
    fn reply_granted(ctx: Ctx, granted: &Self::Granted);
    /// The reply of a wait that ended without a grant (timed out: its request; CLIENT UNBLOCK
    /// of a waiter already gone: `None`). `argv` is the blocked command's.
    fn reply_not_granted(ctx: Ctx, argv: &[RStr], req: Option<&Req<Self>>);
    /// Any key was written (a keyspace event, whether or not anyone waits; only while the
    /// keyspace is watched): a kind that tracks keys other than its waiters' looks here.
    /// Must not write (schedule a timer instead).
    fn key_written(_ctx: Ctx, _key: &[u8]) {}
    /// The dataset may hold keys this module has not seen written (loaded from disk, or this
    /// server just became a master): a kind that tracks keys looks at them again.
    fn dataset_arrived(_ctx: Ctx) {}
}
