//! `LOCK.REDISSON <body|sha1> <numkeys> <keys...> <args...>`: a script the filter recognised
//! (EVAL or EVALSHA with the command name replaced), run natively with the script's exact
//! replies, writes, TTLs, latch keys, token INCRs and release messages. Shared by every kind:
//! the call is looked up and parsed against its row's layout, the checks every kind needs are
//! made here, and the row's kind runs it (one arm per kind).
//!
//! Every input the script accepts runs natively, the odd ones too: a lease <= 0 (PEXPIRE
//! deletes the lock), a lease that is not a number on a path that never uses it, any latch
//! value (converted as Lua's `tonumber` does, see `luanum`). Everything that would make the
//! script raise an error (a key of the wrong type, a hold count or counter that is not an
//! integer, an overflow, a lease or latch time PEXPIRE / SET refuse) is decided before the
//! first write; such a call, and any call on a read-only replica or under OOM, runs the
//! original script in Lua instead (`RM_Call` as the calling user), so the reply and the
//! effects are Lua's own.

use crate::ffi::command::{self, entry};
use crate::ffi::rm::{self, Ctx, RStr};
use crate::logic::error::Error;
use crate::logic::kinds;
use crate::logic::plan::Cmd;
use crate::logic::scripts::{self, Object, OpId};
use crate::module::acl;
use crate::module::scripts::filter;
use crate::module::scripts::plan::Argv;
use crate::registry::cmdinfo::{arg, Arg, ArgKind, Keys, Spec, RW_ACCESS_UPDATE};
use crate::registry::stats;
use std::ffi::c_int;

/// `called`: the (operation, EVALSHA?) the filter recognised, from the command name object;
/// `None` when LOCK.REDISSON was called directly.
fn handle(ctx: Ctx, called: Option<(OpId, bool)>, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let [script, rest @ ..] = argv else {
        return Err(Error::RedissonArity);
    };
    // Called directly: behave exactly as the EVALSHA (a known SHA1 or any 40-hex string) or
    // the EVAL it carries.
    let (op, evalsha) = match called {
        Some(k) => k,
        None => {
            let evalsha = script.len() == 40 && script.iter().all(u8::is_ascii_hexdigit);
            // A disabled (or renamed) EVAL / EVALSHA stays disabled through this command too.
            if !filter::resolves(evalsha) {
                return Err(Error::EvalDisabled);
            }
            match filter::lookup(evalsha, script) {
                Some(op) => (op, evalsha),
                None => return lua(ctx, None, evalsha, strs),
            }
        }
    };
    let Some(def) = kinds::op(op) else { return lua(ctx, Some(op), evalsha, strs) };
    let Ok(call) = scripts::parse(&def.layout, rest) else {
        return lua(ctx, Some(op), evalsha, strs);
    };
    if crate::module::writes::readonly_replica(ctx) || rm::over_maxmemory() {
        return lua(ctx, Some(op), evalsha, strs);
    }
    // The user must be allowed the EVAL / EVALSHA the client sent, with the script's keys.
    let user = acl::calling_user(ctx);
    if let Some(u) = &user {
        let mut sent = Vec::with_capacity(strs.len() + 1);
        sent.push(acl::name(if evalsha { Cmd::EvalSha } else { Cmd::Eval }));
        sent.extend_from_slice(strs);
        if !u.may_run(&sent) {
            rm::reply_error(ctx, &acl::eval_denied(u, evalsha).reply());
            return Ok(());
        }
    }
    let Some(a) = Argv::of(strs, &call, user.as_ref()) else { return lua(ctx, Some(op), evalsha, strs) };
    let now = rm::millis();
    let done = match def.op.object {
        Object::Lock => crate::module::lock::scripts::run(ctx, def.op, &call, &a, now),
        Object::RwLock => crate::module::rwlock::scripts::run(ctx, def.op, &call, &a, now),
        Object::Semaphore => crate::module::semaphore::scripts::run(ctx, def.op, &call, &a, now),
        Object::FairLock => crate::module::lock::fair_scripts::run(ctx, def.op, &call, &a, now),
        Object::Latch => crate::module::latch::scripts::run(ctx, def.op, &call, &a, now),
    };
    match done {
        Ok(()) => {
            stats::redisson_native(op);
            Ok(())
        }
        Err(_) => lua(ctx, Some(op), evalsha, strs),
    }
}

/// Run the original EVAL / EVALSHA in Lua, as the calling user, and forward its reply.
fn lua(ctx: Ctx, op: Option<OpId>, evalsha: bool, strs: &[RStr]) -> Result<(), Error> {
    if let Some(op) = op {
        stats::redisson_lua(op);
    }
    let Ok(reply) = crate::ffi::call::script(ctx, evalsha, strs) else { return Err(Error::LuaFailed) };
    reply.reply_with(ctx);
    Ok(())
}

/// Report the keys (argv[3..3 + numkeys]) when Redis asks for them (`getkeys-api`: Redis 7.0
/// routes module commands in a cluster by their legacy key range or this callback only).
fn key_positions(ctx: Ctx, strs: &[RStr]) {
    let numkeys = strs.get(2).and_then(|s| scripts::numkeys(rm::bytes(s))).unwrap_or(0);
    let last = numkeys.min(strs.len().saturating_sub(3)) + 3;
    for pos in 3..last {
        if let Ok(pos) = c_int::try_from(pos) {
            command::key_at_pos(ctx, pos);
        }
    }
}

entry!(redisson_cmd, |ctx, argv: &command::Argv| {
    let strs = argv.strs();
    if command::is_keys_position_request(ctx) {
        key_positions(ctx, strs);
        return command::OK;
    }
    let called = strs.first().and_then(|name| filter::identify(*name));
    command::run(ctx, argv, |ctx, s, b| handle(ctx, called, s, b))
});

/// LOCK.REDISSON's row: entry point, registration flags, key positions, COMMAND DOCS.
pub const COMMAND: Spec = Spec {
        name: c"lock.redisson",
        handler: redisson_cmd,
        // Like EVAL: not flagged write (a script decides at run time; on a read-only replica or
        // under OOM the call runs in Lua and fails or succeeds as the script does).
        flags: c"deny-script may-replicate allow-stale no-mandatory-keys getkeys-api",
        acl: c"scripting slow",
        arity: -3,
        summary: c"Runs a Redisson lock script natively; the command filter of lock.redisson-scripts native renames EVAL/EVALSHA calls of known scripts into it",
        complexity: c"O(N) where N is the number of keys (1 to 5, or the batch size of a watchdog renewal), the holds a read unlock walks, or the waiters of a fair lock whose deadlines a take or give-up lowers",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::Numkeys(2),
        args: &[
            arg(c"script-or-sha1", ArgKind::Str),
            arg(c"numkeys", ArgKind::Int),
            Arg { name: c"key", kind: ArgKind::Key, token: None, optional: false, multiple: true },
            Arg { name: c"arg", kind: ArgKind::Str, token: None, optional: true, multiple: true },
        ],
    };
