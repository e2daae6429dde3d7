//! Redisson's count-down latch scripts run natively: trySetCount, countDown and delete, with
//! the script's reply, writes (replicated as SET, DECR, DEL; the events those commands fire)
//! and message. The path is checked (ACL per command, write refusal) before anything is
//! written. A count DECR refuses (not an integer, another type, an overflow) and an SPUBLISH
//! outside the latch's slot run in Lua, untouched. The entry point, the call's parsing and the
//! Lua fallback are shared by every kind (`module/scripts/native.rs`).

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::replicate::replicate_argv;
use crate::ffi::rm::{self, Ctx, NOTIFY_STRING};
use crate::logic::args::parse_i64;
use crate::logic::latch::scripts::LatchOp;
use crate::logic::plan::{Arg, Cmd, Plan, Quirk};
use crate::logic::scripts::{Call, Op, Publish, Role};
use crate::module::cluster;
use crate::module::effects;
use crate::module::scripts::plan::{check_script_path, Argv};

fn slot(i: Option<usize>) -> Result<u32, Quirk> {
    i.and_then(|i| u32::try_from(i).ok()).ok_or(Quirk::Layout)
}

/// What the path writes.
enum Write {
    Nothing,
    /// SET the count (ARGV slot).
    Set(usize),
    /// DECR to this value; `true`: the key is deleted next.
    Decr(i64, bool),
    Delete,
}

/// Run latch operation `op` for `call`. `Err`: the call runs in Lua; nothing was written.
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, _now: i64) -> Result<(), Quirk> {
    let op = LatchOp::of(op).ok_or(Quirk::Layout)?;
    let (k, ch, msg) = (
        slot(call.key_index(Role::Lock))?,
        slot(call.key_index(Role::Channel))?,
        slot(call.arg_index(Role::Message))?,
    );
    let publish = if call.publish == Some(Publish::SPublish) { Cmd::SPublish } else { Cmd::Publish };
    if publish == Cmd::SPublish && cluster::enabled() {
        let (key, channel) = (call.key(k as usize), call.key(ch as usize));
        if key.map(cluster::key_slot) != channel.map(cluster::key_slot) {
            return Err(Quirk::CrossSlotPublish);
        }
    }
    let name = a.key(k as usize).ok_or(Quirk::Layout)?;
    let key = Key::write(ctx, name);
    let kind = key.kind();
    let mut p = Plan::new();
    let (write, publishes, reply) = match op {
        LatchOp::TrySetCountPublish | LatchOp::TrySetCount => {
            p.read(Cmd::Exists, [Arg::Key(k)]);
            if kind == KeyKind::Empty {
                let count = slot(call.arg_index(Role::Count))?;
                p.read(Cmd::Set, [Arg::Key(k), Arg::Argv(count)]);
                (Write::Set(count as usize), true, Some(1))
            } else {
                (Write::Nothing, false, Some(0))
            }
        }
        LatchOp::CountDownPublish | LatchOp::CountDown => {
            let old = match kind {
                KeyKind::Empty => 0,
                KeyKind::String => key.string_get(parse_i64).flatten().ok_or(Quirk::CountNotInteger)?,
                _ => return Err(Quirk::WrongType),
            };
            let new = old.checked_sub(1).ok_or(Quirk::CountOverflow)?;
            p.read(Cmd::Decr, [Arg::Key(k)]);
            if new <= 0 {
                p.read(Cmd::Del, [Arg::Key(k)]);
            }
            (Write::Decr(new, new <= 0), new == 0, None)
        }
        LatchOp::DeletePublish | LatchOp::Delete => {
            p.read(Cmd::Del, [Arg::Key(k)]);
            if kind == KeyKind::Empty {
                (Write::Nothing, false, Some(0))
            } else {
                (Write::Delete, true, Some(1))
            }
        }
    };
    if publishes {
        p.read(publish, [Arg::Key(ch), Arg::Argv(msg)]);
    }
    if let Err(e) = check_script_path(ctx, a, &p) {
        rm::reply_error(ctx, &e.reply());
        return Ok(());
    }
    match write {
        Write::Nothing => {}
        Write::Set(i) => {
            if let Some(v) = a.arg(i) {
                key.string_set(v);
                replicate_argv(ctx, c"SET", &[name, v]);
                rm::notify(ctx, NOTIFY_STRING, c"set", name);
                rm::signal_modified(ctx, name);
            }
        }
        Write::Decr(new, gone) => {
            let v = new.to_string();
            key.string_overwrite(v.as_bytes());
            // As DECR: INCRBY -1, or SET value KEEPTTL through the call's own argv.
            crate::ffi::replication::count(ctx, name, -1, v.as_bytes());
            rm::notify(ctx, NOTIFY_STRING, c"incrby", name); // DECR fires incrby
            if gone {
                effects::delete(ctx, &key, name);
            } else {
                rm::signal_modified(ctx, name);
            }
        }
        Write::Delete => effects::delete(ctx, &key, name),
    }
    if publishes {
        if let (Some(c), Some(m)) = (a.key(ch as usize), a.arg(msg as usize)) {
            effects::publish(ctx, c, m, publish == Cmd::SPublish);
        }
    }
    match reply {
        Some(n) => rm::reply_int(ctx, n),
        None => rm::reply_null(ctx),
    };
    Ok(())
}
