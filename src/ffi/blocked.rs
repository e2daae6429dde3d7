//! Blocked clients: `RM_BlockClient` with the module's callbacks, and the handle that unblocks.
//!
//! The glue implements [`Waits`] (safe functions); the `extern "C"` shims Redis calls live here
//! and hand it typed values: the outcome given to [`unblock`], the command's argv as a slice.

use crate::ffi::rm::{rm, Ctx, RStr};
use redis_module::raw;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

/// A blocked client's handle (`RedisModuleBlockedClient`), made only here.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client(*mut raw::RedisModuleBlockedClient);

// SAFETY: the server calls the module from its main thread only, so a handle kept in the
// glue's static tables is only ever used on that thread.
unsafe impl Send for Client {}

impl Client {
    /// No blocked client: the handle of a queue entry that is not one (a script owner's turn).
    /// [`unblock`] does nothing with it.
    pub const NONE: Client = Client(null_mut());
}

/// What the glue does for its blocked clients. One implementation per outcome type; every
/// client blocked with [`block::<W>`] must be unblocked with [`unblock::<W>`].
pub trait Waits: 'static {
    /// What a wait ended with, handed from [`unblock`] to [`Waits::reply`].
    type Outcome: 'static;
    /// Reply to an unblocked client; `None` when it was unblocked without an outcome.
    fn reply(ctx: Ctx, outcome: Option<&Self::Outcome>, argv: &[RStr]);
    /// CLIENT UNBLOCK (the waits have no Redis-side timeout): reply; Redis then frees the client.
    fn unblocked(ctx: Ctx, client: Client, argv: &[RStr]);
    /// The client disconnected; true when it was still waiting (it is then unblocked).
    fn disconnected(ctx: Ctx, client: Client) -> bool;
}

/// Block the calling client with `W`'s callbacks (no Redis timeout); `None` when Redis refused.
#[inline]
pub fn block<W: Waits>(ctx: Ctx) -> Option<Client> {
    let bc = rm!(RedisModule_BlockClient(ctx.0, Some(on_reply::<W>), Some(on_timeout::<W>), Some(free_outcome::<W>), 0) else null_mut());
    if bc.is_null() {
        return None;
    }
    rm!(RedisModule_SetDisconnectCallback(bc, Some(on_disconnect::<W>)) else ());
    Some(Client(bc))
}

/// Unblock `client` (blocked with [`block::<W>`]) with `outcome`, replied by [`Waits::reply`].
#[inline]
pub fn unblock<W: Waits>(client: Client, outcome: W::Outcome) {
    let bc = client.0;
    if bc.is_null() {
        return;
    }
    let pd = Box::into_raw(Box::new(outcome)).cast::<c_void>();
    if rm!(RedisModule_UnblockClient(bc, pd) else raw::REDISMODULE_ERR as c_int)
        != raw::REDISMODULE_OK as c_int
    {
        // SAFETY: Redis refused the handle, so it did not take the box.
        drop(unsafe { Box::from_raw(pd.cast::<W::Outcome>()) });
    }
}

/// The argv Redis passes to a blocked client's callbacks.
fn args<'a>(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> &'a [RStr] {
    match usize::try_from(argc) {
        // SAFETY: Redis passes argc valid strings at argv, alive during the callback; an RStr
        // is a transparent wrapper of the string pointer.
        Ok(n) if n > 0 && !argv.is_null() => unsafe { std::slice::from_raw_parts(argv.cast::<RStr>(), n) },
        _ => &[],
    }
}

unsafe extern "C" fn on_reply<W: Waits>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let pd = rm!(RedisModule_GetBlockedClientPrivateData(ctx) else null_mut()).cast::<W::Outcome>();
    // SAFETY: the private data is the W::Outcome box handed to RM_UnblockClient (or null).
    W::reply(Ctx(ctx), unsafe { pd.as_ref() }, args(argv, argc));
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn on_timeout<W: Waits>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let bc = rm!(RedisModule_GetBlockedClientHandle(ctx) else null_mut());
    W::unblocked(Ctx(ctx), Client(bc), args(argv, argc));
    rm!(RedisModule_UnblockClient(bc, null_mut()) else 0);
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn on_disconnect<W: Waits>(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    if W::disconnected(Ctx(ctx), Client(bc)) {
        rm!(RedisModule_UnblockClient(bc, null_mut()) else 0);
    }
}

unsafe extern "C" fn free_outcome<W: Waits>(_ctx: *mut raw::RedisModuleCtx, pd: *mut c_void) {
    if !pd.is_null() {
        // SAFETY: every private data handed to RM_UnblockClient for W is a Box<W::Outcome>.
        drop(unsafe { Box::from_raw(pd.cast::<W::Outcome>()) });
    }
}
