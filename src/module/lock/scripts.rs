//! `LOCK.REDISSON <body|sha1> <numkeys> <keys...> <args...>`: a Redisson lock script the filter
//! recognised (EVAL or EVALSHA with the command name replaced), run natively with the script's
//! exact replies, writes, TTLs, latch keys, token INCRs and release messages.
//!
//! Every input the script accepts runs natively, the odd ones too: a lease <= 0 (PEXPIRE
//! deletes the lock), a lease that is not a number on a path that never uses it, any latch
//! value (converted as Lua's `tonumber` does, see `luanum`). Everything that would make the
//! script raise an error (a key of the wrong type, a hold count or counter that is not an
//! integer, an overflow, a lease or latch time PEXPIRE / SET refuse) is checked before the
//! first write; such a call, and any call on a read-only replica or under
//! OOM, runs the original script in Lua instead (`RM_Call` as the calling user), so the reply
//! and the effects are Lua's own. The intended differences: a release that frees a lock with
//! LOCK.* waiters hands it to the head waiter (no message), and the effects reach replicas and
//! the AOF with absolute deadlines.

use crate::ffi::command::{self, entry};
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::error::Error;
use crate::logic::lock::scripts::{self as redisson, Call, Kind, Publish};
use crate::module::acl::{self, Cmd, Step};
use crate::module::cluster;
use crate::module::effects;
use crate::module::lock::waiting::Lock;
use crate::module::wait;
use crate::registry::cmdinfo::{arg, Arg, ArgKind, Keys, Spec, RW_ACCESS_UPDATE};
use crate::registry::stats;
use std::ffi::c_int;

use crate::ffi::rm::{NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_STRING};

/// The script must run in Lua for this call.
struct ToLua;

type Native = Result<(), ToLua>;

/// Position of the first key in the command's argv without its name: script, numkeys.
const FIRST_KEY: usize = 2;

/// The argv strings (without the command name), for writes and replication.
struct Argv<'a> {
    strs: &'a [RStr],
    numkeys: usize,
    /// The calling user when its permissions must be checked (see acl.rs).
    user: Option<&'a acl::User>,
}

impl<'a> Argv<'a> {
    /// An empty path: commands are recorded only when the user's permissions are checked.
    fn path<'s>(&self) -> acl::Path<'s> {
        acl::Path::new(self.user.is_some())
    }
    fn path_of<'s>(&self, steps: &[Step<'s>]) -> acl::Path<'s> {
        acl::Path::of(self.user.is_some(), steps)
    }
    /// Whether the script may take this path: every command on it allowed to the user, and
    /// writes accepted by the server if it writes. Otherwise the error is replied (nothing was
    /// written) and the caller stops.
    fn allowed(&self, ctx: Ctx, steps: &acl::Path) -> bool {
        match acl::check_path(ctx, self.user, self.key(0), steps) {
            Ok(()) => true,
            Err(e) => {
                rm::reply_error(ctx, &e.reply());
                false
            }
        }
    }
    fn key(&self, i: usize) -> RStr {
        self.strs.get(FIRST_KEY + i).copied().unwrap_or(RStr::ABSENT)
    }
    fn arg(&self, i: usize) -> RStr {
        self.strs.get(FIRST_KEY + self.numkeys + i).copied().unwrap_or(RStr::ABSENT)
    }
}

/// `called`: the (kind, EVALSHA?) the filter recognised, from the command name object; `None`
/// when LOCK.REDISSON was called directly.
fn handle(ctx: Ctx, called: Option<(Kind, bool)>, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let [script, rest @ ..] = argv else {
        return Err(Error::RedissonArity);
    };
    // Called directly: behave exactly as the EVALSHA (a known SHA1 or any 40-hex string) or
    // the EVAL it carries.
    let (kind, evalsha) = match called {
        Some(k) => k,
        None => {
            let evalsha = script.len() == 40 && script.iter().all(u8::is_ascii_hexdigit);
            // A disabled (or renamed) EVAL / EVALSHA stays disabled through this command too.
            if !crate::module::scripts::filter::resolves(evalsha) {
                return Err(Error::EvalDisabled);
            }
            match crate::module::scripts::filter::lookup(evalsha, script) {
                Some(kind) => (kind, evalsha),
                None => return lua(ctx, None, evalsha, strs),
            }
        }
    };
    let Ok(call) = redisson::parse(kind, rest) else {
        return lua(ctx, Some(kind), evalsha, strs);
    };
    if crate::module::writes::readonly_replica(ctx) || rm::over_maxmemory() {
        return lua(ctx, Some(kind), evalsha, strs);
    }
    let numkeys =
        rest.first().and_then(|n| crate::logic::args::parse_i64(n)).and_then(|n| usize::try_from(n).ok());
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
    let a = Argv { strs, numkeys: numkeys.unwrap_or(0), user: user.as_ref() };
    let now = rm::millis();
    let done = match &call {
        Call::Acquire { lease, token_key, fenced_reply, .. } => {
            acquire(ctx, &a, *lease, token_key.is_some(), *fenced_reply, now)
        }
        Call::Unlock { lock, channel, lease, publish, latch, .. } => {
            unlock(ctx, &a, (lock, channel), *lease, *publish, latch.map(|(_, ms)| ms.ok_or(ToLua)), now)
        }
        Call::ForceUnlock { lock, channel, publish, .. } => {
            force_unlock(ctx, &a, (lock, channel), *publish, now)
        }
        Call::Renew { lease, pairs, batch } => renew(ctx, &a, *lease, pairs.len(), *batch, now),
    };
    match done {
        Ok(()) => {
            stats::redisson_native(kind);
            Ok(())
        }
        Err(ToLua) => lua(ctx, Some(kind), evalsha, strs),
    }
}

/// Run the original EVAL / EVALSHA in Lua, as the calling user, and forward its reply.
fn lua(ctx: Ctx, kind: Option<Kind>, evalsha: bool, strs: &[RStr]) -> Result<(), Error> {
    if let Some(k) = kind {
        stats::redisson_lua(k);
    }
    let Ok(reply) = crate::ffi::call::script(ctx, evalsha, strs) else { return Err(Error::LuaFailed) };
    reply.reply_with(ctx);
    Ok(())
}

/// A hash field's value as the integer HINCRBY would read: absent -> `Ok(None)`,
/// not an integer -> `Err` (HINCRBY would raise an error).
fn field_count(key: &Key, owner: RStr) -> Result<Option<i64>, ToLua> {
    match key.hash_get(owner, crate::logic::args::parse_i64) {
        None => Ok(None),
        Some(Some(n)) => Ok(Some(n)),
        Some(None) => Err(ToLua),
    }
}

/// The lock key for a script that reads it with hash commands: `Err` for another type.
fn open_hash(ctx: Ctx, name: RStr) -> Result<Key, ToLua> {
    let key = Key::write(ctx, name);
    match key.kind() {
        KeyKind::Other => Err(ToLua),
        _ => Ok(key),
    }
}

fn deadline(now: i64, ms: i64) -> Result<i64, ToLua> {
    now.checked_add(ms).ok_or(ToLua)
}

/// HINCRBY owner +-1 to `count`, with its replication and event.
fn write_count(ctx: Ctx, key: &Key, name: RStr, owner: RStr, count: i64, delta: i8) {
    effects::set_count(ctx, key, name, owner, count, delta);
}

/// PEXPIRE (replicated as PEXPIREAT) with its event.
fn write_lease(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64) {
    effects::set_lease(ctx, key, name, deadline, now);
}

fn acquire(ctx: Ctx, a: &Argv, lease: Option<i64>, fenced: bool, fenced_reply: bool, now: i64) -> Native {
    let (name, owner) = (a.key(0), a.arg(1));
    let key = open_hash(ctx, name)?;
    // LOCK.* waiters go first: a lock freed behind their back belongs to the head of the
    // queue; a lock kept for another script owner's turn is not free for this one.
    let mut free = key.kind() == KeyKind::Empty;
    let mut turn_pttl = None;
    if free && wait::has_waiters::<Lock>(ctx, name) {
        if wait::grant_head::<Lock>(ctx, &key, name, now, false) {
            free = key.kind() == KeyKind::Empty;
        } else if let wait::Turn::Wait(ms) = wait::turn::<Lock>(ctx, name, rm::bytes(&owner), now) {
            turn_pttl = Some(ms);
        }
    }
    let mine = if free { None } else { field_count(&key, owner)? };
    let (lease_s, one) = (a.arg(0), rm::one());
    let k = [name];
    let k_owner = [name, owner];
    if turn_pttl.is_some() || (!free && mine.is_none()) {
        let mut steps = a.path_of(&[Step::read(Cmd::Exists, &k)]);
        if !free {
            steps.push(Step::read(Cmd::HExists, &k_owner));
        }
        steps.push(Step::read(Cmd::PTtl, &k));
        if !a.allowed(ctx, &steps) {
            return Ok(());
        }
        let pttl = turn_pttl.unwrap_or_else(|| key.pttl());
        // While LOCK.* clients wait, this owner takes a place in their FIFO.
        wait::queue_turn::<Lock>(ctx, name, rm::bytes(&owner), Default::default(), pttl, now);
        if fenced_reply {
            rm::reply_pair(ctx, pttl, -1);
        } else {
            rm::reply_int(ctx, pttl);
        }
        return Ok(());
    }
    let count = mine.unwrap_or(0).checked_add(1).ok_or(ToLua)?;
    // PEXPIRE with a lease <= 0 deletes the lock the script just wrote.
    let lock_deadline = match lease.ok_or(ToLua)? {
        ms if ms > 0 => Some(deadline(now, ms)?),
        _ => None,
    };
    // The fenced scripts INCR the token counter: check it before writing anything.
    let counter = if fenced {
        let tname = a.key(1);
        if rm::bytes(&tname) == rm::bytes(&name) {
            return Err(ToLua); // INCR on the lock hash: the script fails half-way
        }
        let tkey = Key::write(ctx, tname);
        let stored = match tkey.kind() {
            KeyKind::Empty => 0,
            _ if tkey.is_string() => tkey.string_get(crate::logic::args::parse_i64).flatten().ok_or(ToLua)?,
            _ => return Err(ToLua),
        };
        Some((tkey, tname, stored.checked_add(1).ok_or(ToLua)?))
    } else {
        None
    };
    let incr = [name, owner, one.ptr()];
    let expire = [name, lease_s];
    let token_key = [a.key(1)];
    let mut steps = a.path_of(&[Step::read(Cmd::Exists, &k)]);
    if !free {
        steps.push(Step::read(Cmd::HExists, &k_owner));
    }
    steps.push(Step::write(Cmd::HIncrBy, &incr));
    steps.push(Step::write(Cmd::PExpire, &expire));
    if fenced {
        steps.push(Step::write(Cmd::Incr, &token_key));
    }
    if !a.allowed(ctx, &steps) {
        return Ok(());
    }
    match lock_deadline {
        Some(d) => {
            write_count(ctx, &key, name, owner, count, 1);
            if free {
                effects::set_first_lease(ctx, &key, name, d, now);
            } else {
                write_lease(ctx, &key, name, d, now);
            }
            rm::signal_modified(ctx, name);
        }
        None => delete_after_hincrby(ctx, &key, name),
    }
    let token = counter.map(|(tkey, tname, value)| {
        // INCR keeps the counter's TTL.
        let ttl = tkey.deadline();
        tkey.string_set(OwnedStr::from_i64(value).ptr());
        if let Some(d) = ttl {
            tkey.set_deadline(d, now);
        }
        rm::replicate_incr(ctx, tname);
        rm::notify(ctx, NOTIFY_STRING, c"incrby", tname);
        rm::signal_modified(ctx, tname);
        value
    });
    match (fenced_reply, token) {
        (true, Some(t)) => rm::reply_pair(ctx, -1, t),
        _ => rm::reply_null(ctx),
    };
    Ok(())
}

/// The script's HINCRBY then a PEXPIRE <= 0: the lock is deleted (events `hincrby`, `del`;
/// replicated as DEL, as PEXPIRE in the past is).
fn delete_after_hincrby(ctx: Ctx, key: &Key, name: RStr) {
    rm::notify(ctx, NOTIFY_HASH, c"hincrby", name);
    effects::delete(ctx, key, name);
}

/// The command a script publishes its release message with.
fn publish_cmd(publish: Publish) -> Cmd {
    match publish {
        Publish::Publish => Cmd::Publish,
        Publish::SPublish => Cmd::SPublish,
    }
}

/// In a cluster, a script's SPUBLISH must stay in the script's slot; Lua raises an error (after
/// the lock was deleted) when it does not, so such a call runs in Lua.
fn publish_allowed(publish: Publish, lock: &[u8], channel: &[u8]) -> bool {
    publish == Publish::Publish
        || !cluster::enabled()
        || cluster::key_slot(lock) == cluster::key_slot(channel)
}

/// Free the lock: hand it to the head LOCK.* waiter, or publish the script's message.
fn release_lock(ctx: Ctx, key: &Key, a: &Argv, publish: Publish, message: RStr, now: i64) {
    let name = a.key(0);
    if !wait::grant_head::<Lock>(ctx, key, name, now, true) {
        effects::publish(ctx, a.key(1), message, publish == Publish::SPublish);
    }
}

/// SET latch value PX ms (replicated as SET ... PXAT), with the events SET fires.
fn write_latch(ctx: Ctx, name: RStr, value: i64, deadline: i64, now: i64) {
    let key = Key::write(ctx, name);
    let v = if value == 0 { rm::zero() } else { rm::one() };
    key.string_set(v.ptr());
    key.set_deadline(deadline, now);
    rm::replicate_set(ctx, name, v.ptr(), Some(deadline));
    rm::notify(ctx, NOTIFY_STRING, c"set", name);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
    rm::signal_modified(ctx, name);
}

fn unlock(
    ctx: Ctx,
    a: &Argv,
    (lock, channel): (&&[u8], &&[u8]),
    lease: Option<i64>,
    publish: Publish,
    latch_ms: Option<Result<i64, ToLua>>,
    now: i64,
) -> Native {
    let latch_k = [a.key(2)];
    let get_latch = Step::read(Cmd::Get, &latch_k);
    let mut steps = a.path();
    // 3.24+: an existing latch answers a retried unlock and nothing else happens.
    if latch_ms.is_some() {
        let latch = Key::write(ctx, a.key(2));
        match latch.kind() {
            KeyKind::Empty => {}
            _ if latch.is_string() => {
                // `return tonumber(value)`: nil for what Lua does not convert.
                let v = latch.string_get(crate::ffi::luanum::latch_reply).ok_or(ToLua)?;
                if !a.allowed(ctx, &a.path_of(&[get_latch])) {
                    return Ok(());
                }
                match v {
                    Some(v) => rm::reply_int(ctx, v),
                    None => rm::reply_null(ctx),
                };
                return Ok(());
            }
            _ => return Err(ToLua),
        }
        steps.push(get_latch);
    }
    let (name, owner) = (a.key(0), a.arg(2));
    let key = open_hash(ctx, name)?;
    let k_owner = [name, owner];
    steps.push(Step::read(Cmd::HExists, &k_owner));
    let Some(count) = (if key.kind() == KeyKind::Empty { None } else { field_count(&key, owner)? }) else {
        if !a.allowed(ctx, &steps) {
            return Ok(());
        }
        rm::reply_null(ctx);
        return Ok(());
    };
    let left = count.checked_sub(1).ok_or(ToLua)?;
    let has_latch = latch_ms.is_some();
    let latch_deadline = latch_ms.map(|ms| ms.and_then(|ms| deadline(now, ms))).transpose()?;
    let minus_one = rm::minus_one();
    let decr = [name, owner, minus_one.ptr()];
    steps.push(Step::write(Cmd::HIncrBy, &decr));
    let expire = [name, a.arg(1)];
    let k = [name];
    let publish_args = [a.key(1), a.arg(0)];
    let latch_value = if left > 0 { rm::zero() } else { rm::one() };
    let set_latch = [a.key(2), latch_value.ptr(), acl::px(), a.arg(4)];
    if left > 0 {
        steps.push(Step::write(Cmd::PExpire, &expire));
    } else {
        steps.push(Step::write(Cmd::Del, &k));
        steps.push(Step::read(publish_cmd(publish), &publish_args));
    }
    if has_latch {
        steps.push(Step::write(Cmd::Set, &set_latch));
    }
    if !a.allowed(ctx, &steps) {
        return Ok(());
    }
    if left > 0 {
        match lease.ok_or(ToLua)? {
            ms if ms > 0 => {
                let lock_deadline = deadline(now, ms)?;
                write_count(ctx, &key, name, owner, left, -1);
                write_lease(ctx, &key, name, lock_deadline, now);
                rm::signal_modified(ctx, name);
            }
            // PEXPIRE <= 0 deletes the lock, which is still held: no release message.
            _ => delete_after_hincrby(ctx, &key, name),
        }
        if let Some(d) = latch_deadline {
            write_latch(ctx, a.key(2), 0, d, now);
        }
        rm::reply_int(ctx, 0);
        return Ok(());
    }
    if !publish_allowed(publish, lock, channel) {
        return Err(ToLua);
    }
    // The script's HINCRBY to 0, then DEL: the same two events, one DEL replicated.
    rm::notify(ctx, NOTIFY_HASH, c"hincrby", name);
    effects::delete(ctx, &key, name);
    release_lock(ctx, &key, a, publish, a.arg(0), now);
    if let Some(d) = latch_deadline {
        write_latch(ctx, a.key(2), 1, d, now);
    }
    rm::reply_int(ctx, 1);
    Ok(())
}

fn force_unlock(ctx: Ctx, a: &Argv, (lock, channel): (&&[u8], &&[u8]), publish: Publish, now: i64) -> Native {
    let name = a.key(0);
    let k = [name];
    let publish_args = [a.key(1), a.arg(0)];
    // DEL works on any type.
    let key = Key::write(ctx, name);
    if key.kind() == KeyKind::Empty {
        // DEL of a missing key writes nothing, but the server refuses it all the same.
        if !a.allowed(ctx, &a.path_of(&[Step::write(Cmd::Del, &k)])) {
            return Ok(());
        }
        rm::reply_int(ctx, 0);
        return Ok(());
    }
    if !publish_allowed(publish, lock, channel) {
        return Err(ToLua);
    }
    let steps = a.path_of(&[Step::write(Cmd::Del, &k), Step::read(publish_cmd(publish), &publish_args)]);
    if !a.allowed(ctx, &steps) {
        return Ok(());
    }
    effects::delete(ctx, &key, name);
    release_lock(ctx, &key, a, publish, a.arg(0), now);
    rm::reply_int(ctx, 1);
    Ok(())
}

fn renew(ctx: Ctx, a: &Argv, lease: Option<i64>, n: usize, batch: bool, now: i64) -> Native {
    // HEXISTS on a key of another type raises an error: check every key before writing.
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        keys.push(open_hash(ctx, a.key(i))?);
    }
    let held = |key: &Key, i: usize| key.kind() == KeyKind::Hash && key.hash_has(a.arg(i + 1));
    let held_at_start: Vec<bool> = keys.iter().enumerate().map(|(i, k)| held(k, i)).collect();
    let lease = match lease {
        Some(ms) => ms,
        // PEXPIRE fails on a lease that is not an integer, if the script reaches it.
        None if held_at_start.iter().any(|h| *h) => return Err(ToLua),
        None => 0,
    };
    let pairs: Vec<[RStr; 2]> = (0..n).map(|i| [a.key(i), a.arg(i + 1)]).collect();
    let expires: Vec<[RStr; 2]> = (0..n).map(|i| [a.key(i), a.arg(0)]).collect();
    let mut steps = a.path();
    for ((pair, expire), h) in pairs.iter().zip(&expires).zip(&held_at_start) {
        steps.push(Step::read(Cmd::HExists, pair));
        if *h {
            steps.push(Step::write(Cmd::PExpire, expire));
        }
    }
    if !a.allowed(ctx, &steps) {
        return Ok(());
    }
    let mut renewed = Vec::with_capacity(n);
    if lease > 0 {
        let lock_deadline = deadline(now, lease)?;
        // Renewing changes no key's holder: what was held at the start is held now.
        for ((i, key), &h) in keys.iter().enumerate().zip(&held_at_start) {
            let name = a.key(i);
            if h {
                write_lease(ctx, key, name, lock_deadline, now);
                rm::signal_modified(ctx, name);
            }
            renewed.push(i64::from(h));
        }
    } else {
        // PEXPIRE <= 0 deletes each lock renewed. One key at a time, each opened afresh: a key
        // named twice must not be read through a handle opened before its deletion.
        drop(keys);
        for i in 0..n {
            let name = a.key(i);
            let key = Key::write(ctx, name);
            let h = held(&key, i);
            if h {
                effects::delete(ctx, &key, name);
            }
            renewed.push(i64::from(h));
        }
    }
    if batch {
        rm::reply_array(ctx, renewed.len());
        for r in renewed {
            rm::reply_int(ctx, r);
        }
    } else {
        rm::reply_int(ctx, renewed.first().copied().unwrap_or(0));
    }
    Ok(())
}

/// Report the keys (argv[3..3 + numkeys]) when Redis asks for them (`getkeys-api`: Redis 7.0
/// routes module commands in a cluster by their legacy key range or this callback only).
fn key_positions(ctx: Ctx, strs: &[RStr]) {
    let n = strs.len() as i64;
    let numkeys = strs.get(2).and_then(|s| crate::logic::args::parse_i64(rm::bytes(s))).unwrap_or(0);
    for pos in 3..3 + numkeys.clamp(0, (n - 3).max(0)) {
        command::key_at_pos(ctx, pos as c_int);
    }
}

entry!(redisson_cmd, |ctx, argv: &command::Argv| {
    let strs = argv.strs();
    if command::is_keys_position_request(ctx) {
        key_positions(ctx, strs);
        return command::OK;
    }
    let called = strs.first().and_then(|name| crate::module::scripts::filter::identify(*name));
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
        complexity: c"O(N) where N is the number of keys (1 to 3, or the batch size of a watchdog renewal)",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::Numkeys(2),
        args: &[
            arg(c"script-or-sha1", ArgKind::Str),
            arg(c"numkeys", ArgKind::Int),
            Arg { name: c"key", kind: ArgKind::Key, token: None, optional: false, multiple: true },
            Arg { name: c"arg", kind: ArgKind::Str, token: None, optional: true, multiple: true },
        ],
    };
