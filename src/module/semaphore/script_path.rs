//! What a natively run semaphore script's path is made of, shared by the decisions
//! (`script_counts.rs`, `script_permits.rs`) and the runner (`scripts.rs`): the reply, the
//! writes in the script's order, the path checked for ACL and write refusals, and the reads and
//! number rules every script uses (Redisson's reclaim among them).

use crate::ffi::key::Key;
use crate::logic::args::parse_i64;
use crate::logic::plan::{Arg, Cmd, Plan, Quirk};
use crate::logic::scripts::{Call, Role};

/// Lua's `unpack` fails with 8000 results or more ("too many results to unpack").
pub(super) const UNPACK_MAX: usize = 7999;

/// Largest magnitude Lua writes as plain integer digits on every server (2^53).
pub(super) const LUA_EXACT: i64 = 1 << 53;

/// What the script replies.
pub(super) enum Out {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
}

/// One write (or message) of the path, in the script's order.
pub(super) enum Act {
    /// ZREM these ids (the reclaim's or a release's).
    ZRem(Vec<Vec<u8>>),
    /// INCRBY / DECRBY the count by `.0`; it becomes `.1`.
    Add(i64, i64),
    /// SET the count to these bytes (PX: ending at the deadline).
    Set(Vec<u8>, Option<i64>),
    /// ZADD the ids (ARGV slots) with the score; copy the count's TTL.
    ZAdd(Vec<usize>, i64, bool),
    /// Offer the permits to LOCK.SEM* waiters.
    Grant,
    /// Publish these bytes on the channel.
    Publish(Vec<u8>),
}

/// The call's keys and what the path has read and decided.
pub(super) struct Path<'a> {
    pub(super) call: &'a Call<'a>,
    pub(super) plan: Plan,
    pub(super) acts: Vec<Act>,
    pub(super) key: usize,
    pub(super) zset: Option<usize>,
    pub(super) channel: Option<usize>,
    pub(super) publish: Cmd,
    /// Whether the path's arguments are checked (a user with restricted permissions): only
    /// then are computed numbers made into strings for the check.
    pub(super) args: bool,
}

pub(super) fn lua<T>() -> Result<T, Quirk> {
    Err(Quirk::LuaNumber)
}

/// An ARGV slot of `role` as an integer; `None` when absent or not one.
pub(super) fn int_arg(call: &Call, role: Role) -> Option<i64> {
    parse_i64(call.arg(call.arg_index(role)?)?)
}

pub(super) fn slot(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl Path<'_> {
    pub(super) fn step1(&mut self, cmd: Cmd, key: usize) {
        self.plan.read(cmd, [Arg::Key(slot(key))]);
    }

    pub(super) fn count_key(&self) -> Arg {
        Arg::Key(slot(self.key))
    }

    /// The count as the script reads it: `None` absent, else its bytes.
    pub(super) fn value(&self, key: &Key) -> Option<Vec<u8>> {
        key.string_get(<[u8]>::to_vec)
    }

    /// A computed number as a step's argument (a placeholder when arguments are not checked).
    pub(super) fn num(&mut self, n: i64) -> Arg {
        if self.args {
            self.plan.made_int(n)
        } else {
            Arg::Zero
        }
    }

    /// A publish of `msg` on the channel, with the script's command.
    pub(super) fn publish(&mut self, msg: Vec<u8>) {
        if let Some(ch) = self.channel {
            let m = if self.args { self.plan.made(&[&msg]) } else { Arg::Zero };
            self.plan.read(self.publish, [Arg::Key(slot(ch)), m]);
        }
        self.acts.push(Act::Publish(msg));
    }

    /// INCRBY (or DECRBY) of the count from `old` by `by`: the new value, or Lua (overflow).
    pub(super) fn add(&mut self, cmd: Cmd, old: i64, by: i64) -> Result<i64, Quirk> {
        let new = old.checked_add(by).ok_or(Quirk::CountOverflow)?;
        let n = self.num(by.saturating_abs());
        self.plan.step(cmd, [self.count_key(), n], crate::logic::plan::Effect::None);
        self.acts.push(Act::Add(by, new));
        Ok(new)
    }

    /// Redisson's reclaim: permits whose score is in `0..=now` (at most `limit`) leave the zset,
    /// the count grows by their number, and the new value is published when positive. Returns
    /// (how many, the count after), `count` the count before (None: absent).
    pub(super) fn reclaim(
        &mut self,
        zset: &Key,
        count: Option<i64>,
        now: i64,
        limit: usize,
    ) -> Result<(usize, Option<i64>), Quirk> {
        let z = self.zset.ok_or(Quirk::Layout)?;
        let now_arg = self.call.arg_index(Role::Now).ok_or(Quirk::Layout)?;
        self.plan.read(Cmd::ZRangeByScore, [Arg::Key(slot(z)), Arg::Zero, Arg::Argv(slot(now_arg))]);
        let mut ids = Vec::new();
        zset.zset_range(0.0, now as f64, limit.min(UNPACK_MAX + 1), &mut |id, _| ids.push(id.to_vec()));
        if ids.len() > UNPACK_MAX {
            return lua();
        }
        if ids.is_empty() {
            return Ok((0, count));
        }
        let n = ids.len();
        self.plan.read(Cmd::ZRem, [Arg::Key(slot(z))]);
        self.acts.push(Act::ZRem(ids));
        let new = self.add(Cmd::IncrBy, count.unwrap_or(0), i64::try_from(n).unwrap_or(i64::MAX))?;
        self.acts.push(Act::Grant);
        if new > 0 {
            self.publish(new.to_string().into_bytes());
        }
        Ok((n, Some(new)))
    }
}

/// The count as an integer (`None` absent); a value the script's arithmetic would fail on
/// sends the call to Lua.
pub(super) fn int_value(v: Option<&[u8]>) -> Result<Option<i64>, Quirk> {
    match v {
        None => Ok(None),
        Some(b) => parse_i64(b).map(Some).ok_or(Quirk::CountNotInteger),
    }
}

/// A zset score as the script sees it through a RESP reply (plain digits for whole numbers up
/// to 2^53 on every server); other scores run in Lua.
pub(super) fn score_text(s: f64) -> Result<Vec<u8>, Quirk> {
    if s.fract() != 0.0 || s.abs() >= LUA_EXACT as f64 {
        return lua();
    }
    Ok((s as i64).to_string().into_bytes())
}

/// The ids of an acquire or a release: the ARGV slots of [`Role::Id`].
pub(super) fn id_slots(call: &Call) -> Vec<usize> {
    (0..call.units).filter_map(|u| call.unit_arg_index(u, Role::Id)).collect()
}

/// Whether the zset holds a permit whose score is in `0..=now` (a reclaim will write).
pub(super) fn zset_has_expired(zset: &Key, now: i64) -> bool {
    let mut any = false;
    zset.zset_range(0.0, now as f64, 1, &mut |_, _| any = true);
    any
}
