//! The one interpreter of natively run scripts: a kind's [`Plan`] (`logic/plan.rs`) becomes the
//! ACL check of every command on the path (with its real arguments, in the script's order), the
//! write refusal at its first write, the effects of the same commands (through `effects.rs` and
//! `token.rs` only), and the reply. Nothing is written before the whole path is allowed.

use crate::ffi::key::Key;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, Shared, StaticStr};
use crate::logic::error::Error;
use crate::logic::plan::{Arg, Cmd, Effect, Plan, Quirk, Reply, Step, Steps, Then};
use crate::logic::scripts::Call;
use crate::module::acl::{self, User};
use crate::module::{effects, token};
use crate::registry::stats;
use std::sync::LazyLock;

/// The read-write lock's `mode` field and its values (`Arg::Mode`, `Arg::Read`, `Arg::Write`),
/// created once and never freed.
static WORDS: LazyLock<[StaticStr; 3]> =
    LazyLock::new(|| [StaticStr::new(b"mode"), StaticStr::new(b"read"), StaticStr::new(b"write")]);

/// Position of KEYS[1] in the command's argv without its name: script, numkeys.
const FIRST_KEY: usize = 2;

/// The call's strings (without the command name: script, numkeys, keys, args).
pub struct Argv<'a> {
    strs: &'a [RStr],
    numkeys: usize,
    /// The calling user when its permissions must be checked (see acl.rs).
    user: Option<&'a User>,
}

impl<'a> Argv<'a> {
    /// The strings of `call` (parsed from the same argv): `None` unless they have its shape, so
    /// that every slot a plan takes from the call is there.
    pub fn of(strs: &'a [RStr], call: &Call, user: Option<&'a User>) -> Option<Argv<'a>> {
        let len = FIRST_KEY.checked_add(call.keys.len())?.checked_add(call.args.len())?;
        (strs.len() == len).then_some(Argv { strs, numkeys: call.numkeys(), user })
    }

    /// Whether the path's commands are checked against a user's ACL with their arguments
    /// (else only whether the path writes matters: a plan needs no made strings).
    #[inline]
    pub fn checks_args(&self) -> bool {
        self.user.is_some()
    }

    /// KEYS slot `i`.
    #[inline]
    pub fn key(&self, i: usize) -> Option<RStr> {
        // Slots come from the parsed call, whose shape the strings have (`Argv::of`).
        self.strs.get(FIRST_KEY + i).copied()
    }

    /// ARGV slot `i`.
    #[inline]
    pub fn arg(&self, i: usize) -> Option<RStr> {
        self.strs.get(FIRST_KEY + self.numkeys + i).copied()
    }

    #[inline]
    fn slot(&self, a: Arg) -> Option<RStr> {
        match a {
            Arg::Key(i) => self.key(usize::try_from(i).ok()?),
            Arg::Argv(i) => self.arg(usize::try_from(i).ok()?),
            Arg::One
            | Arg::MinusOne
            | Arg::Zero
            | Arg::Px
            | Arg::Mode
            | Arg::Read
            | Arg::Write
            | Arg::Made(_) => None,
        }
    }

    /// `a` as a string; a derived one (`Arg::Made`) is made into `made` and lives as long.
    fn resolve(&self, a: Arg, c: &Consts, plan: &Plan, made: &mut Vec<OwnedStr>) -> Option<RStr> {
        match a {
            Arg::One => Some(c.one.ptr()),
            Arg::MinusOne => Some(c.minus_one.ptr()),
            Arg::Zero => Some(c.zero.ptr()),
            Arg::Px => Some(acl::px()),
            Arg::Mode | Arg::Read | Arg::Write => Some(word(a)),
            Arg::Made(i) => {
                let s = OwnedStr::new(plan.made_text(i)?);
                let p = s.ptr();
                made.push(s);
                Some(p)
            }
            Arg::Key(_) | Arg::Argv(_) => self.slot(a),
        }
    }
}

fn word(a: Arg) -> RStr {
    let i = match a {
        Arg::Mode => 0,
        Arg::Read => 1,
        _ => 2,
    };
    WORDS.get(i).map_or(RStr::ABSENT, StaticStr::ptr)
}

/// The constant strings a path's arguments name, held while they are used.
struct Consts {
    one: Shared,
    minus_one: Shared,
    zero: Shared,
}

impl Consts {
    fn new() -> Consts {
        Consts { one: rm::one(), minus_one: rm::minus_one(), zero: rm::zero() }
    }
}

/// The keys a kind's glue opened while reading, by KEYS slot, reused by the effects.
pub struct Handles {
    ctx: Ctx,
    few: [Option<Key>; 3],
    more: Vec<Option<Key>>,
    /// How many handles were opened.
    opened: usize,
}

impl Handles {
    /// Room for `numkeys` handles (allocated once, for a call of more than three keys).
    pub fn new(ctx: Ctx, numkeys: usize) -> Handles {
        let mut more = Vec::new();
        if numkeys > 3 {
            more.resize_with(numkeys - 3, || None);
        }
        Handles { ctx, few: [const { None }; 3], more, opened: 0 }
    }

    /// The handle of KEYS slot `i`, opened (for writing) on first use.
    #[inline]
    pub fn open(&mut self, a: &Argv, i: usize) -> Option<&Key> {
        let ctx = self.ctx;
        let slot = match i.checked_sub(self.few.len()) {
            None => self.few.get_mut(i)?,
            Some(j) => self.more.get_mut(j)?,
        };
        if slot.is_none() {
            *slot = Some(Key::write(ctx, a.key(i)?));
            self.opened += 1;
        }
        slot.as_ref()
    }

    /// Before key slot `i` is deleted: close the other handles on the same key while they are
    /// still valid (a handle opened before a deletion must not be used or closed after it).
    fn close_others(&mut self, a: &Argv, i: usize) {
        if self.opened < 2 {
            return;
        }
        let Some(name) = a.key(i) else { return };
        let name = rm::bytes(&name);
        for (j, h) in self.few.iter_mut().chain(self.more.iter_mut()).enumerate() {
            if j != i && h.is_some() && a.key(j).is_some_and(|k| rm::bytes(&k) == name) {
                *h = None;
            }
        }
    }
}

/// What a kind does with its waiters when a script frees its object or is told to retry.
pub trait Waiters {
    /// A freed lock goes to the kind's waiters first: whether one took it (no message then).
    fn hand_over(ctx: Ctx, key: &Key, name: RStr, now: i64) -> bool;
    /// An owner told to retry within `pttl` ms keeps a place among the kind's waiters.
    fn keep_turn(ctx: Ctx, name: RStr, owner: &[u8], pttl: i64, now: i64);
}

/// Run `plan`: check its path, then write its effects and reply. `Err`: the call runs in Lua
/// (nothing was written or replied).
pub fn run<W: Waiters>(ctx: Ctx, a: &Argv, keys: &mut Handles, plan: &Plan, now: i64) -> Result<(), Quirk> {
    // KEYS[1] is the write refusal's probe (every slot a plan names comes from the parsed call,
    // whose shape the argv has: `Argv::of`).
    if a.numkeys == 0 {
        return Err(Quirk::Layout);
    }
    if let Err(e) = check_script_path(ctx, a, plan) {
        rm::reply_error(ctx, &e.reply());
        return Ok(());
    }
    let reply = match plan.then {
        Then::Reply(r) => r,
        Then::Lua(q) => return Err(q),
    };
    for s in plan.steps.iter() {
        apply::<W>(ctx, a, keys, s, plan, now);
    }
    match reply {
        Reply::Nil => rm::reply_null(ctx),
        Reply::Int(n) => rm::reply_int(ctx, n),
        Reply::Pair(x, y) => rm::reply_pair(ctx, x, y),
        Reply::Ints => {
            rm::reply_array(ctx, plan.ints.len());
            for n in &plan.ints {
                rm::reply_int(ctx, *n);
            }
            0
        }
        Reply::ErrorArg(i) => reply_text_error(ctx, a.arg(usize::try_from(i).unwrap_or(usize::MAX))),
    };
    Ok(())
}

/// The error a script returns from an ARGV text (checked printable ASCII): `-<text>` when it
/// has a space (its first word is the code), else `-ERR <text>`, as Redis sends
/// `redis.error_reply`.
pub fn reply_text_error(ctx: Ctx, text: Option<RStr>) -> std::ffi::c_int {
    let t = text.map(|t| String::from_utf8_lossy(rm::bytes(&t)).into_owned()).unwrap_or_default();
    let msg = if t.contains(' ') { t } else { format!("ERR {t}") };
    rm::reply_error(ctx, &msg)
}

/// Check the commands of a path in order, as Lua would run them: each command's ACL with its
/// real arguments (for a user whose permissions are checked), and the server's write refusal at
/// the first write. `Err` is the error reply; nothing was written.
pub fn check_script_path(ctx: Ctx, a: &Argv, plan: &Plan) -> Result<(), Error> {
    let steps: &Steps = &plan.steps;
    let probe = a.key(0);
    let Some(user) = a.user else {
        // Every permission: only whether the path writes matters (nothing allocated).
        return if steps.writes() { writes_accepted(ctx, probe) } else { Ok(()) };
    };
    let consts = Consts::new();
    let mut argv: Vec<RStr> = Vec::with_capacity(5);
    let mut made: Vec<OwnedStr> = Vec::new();
    let mut wrote = false;
    for s in steps.iter() {
        let cmd = acl::name(s.cmd);
        argv.clear();
        made.clear();
        argv.push(cmd);
        for x in s.args() {
            if let Some(r) = a.resolve(*x, &consts, plan, &mut made) {
                argv.push(r);
            }
        }
        if !user.may_run(&argv) {
            return Err(acl::inner_denied(user, cmd));
        }
        if s.writes() && !wrote {
            wrote = true;
            writes_accepted(ctx, probe)?;
        }
    }
    Ok(())
}

fn writes_accepted(ctx: Ctx, probe: Option<RStr>) -> Result<(), Error> {
    match probe.and_then(|k| crate::module::writes::refused(ctx, k)) {
        Some(e) => {
            stats::WRITES_REFUSED.inc();
            Err(Error::Refused(e))
        }
        None => Ok(()),
    }
}

/// Write one command's effect.
fn apply<W: Waiters>(ctx: Ctx, a: &Argv, keys: &mut Handles, s: &Step, plan: &Plan, now: i64) {
    if matches!(s.effect, Effect::None) {
        return;
    }
    let args = s.args();
    let at = |n: usize| args.get(n).and_then(|x| a.slot(*x));
    // A derived key (the command's first argument): opened by its effect.
    if let Some(Arg::Made(m)) = args.first() {
        let Some(text) = plan.made_text(*m) else { return };
        let name = OwnedStr::new(text);
        match s.effect {
            Effect::Marker { deadline } => effects::set_marker(ctx, name.ptr(), deadline, now),
            Effect::LeaseNamed { deadline } => {
                effects::expire_named(ctx, name.ptr(), deadline, now);
            }
            Effect::DeleteNamed => {
                effects::delete_named(ctx, name.ptr());
            }
            _ => {}
        }
        return;
    }
    // The key the command works on: its first argument.
    let Some((i, name)) = (match args.first() {
        Some(Arg::Key(i)) => usize::try_from(*i).ok().and_then(|i| Some((i, a.key(i)?))),
        _ => None,
    }) else {
        return;
    };
    match s.effect {
        Effect::None | Effect::Marker { .. } | Effect::LeaseNamed { .. } | Effect::DeleteNamed => {}
        Effect::Count { count, up } => {
            if let (Some(key), Some(owner)) = (keys.open(a, i), at(1)) {
                effects::set_count(ctx, key, name, owner, count, if up { 1 } else { -1 });
            }
        }
        Effect::CountThenGone => effects::hincrby_event(ctx, name),
        Effect::Lease { deadline, fresh } => {
            if let Some(key) = keys.open(a, i) {
                effects::rearm(ctx, key, name, deadline, now, fresh);
            }
        }
        Effect::Delete => {
            keys.close_others(a, i);
            if let Some(key) = keys.open(a, i) {
                effects::delete(ctx, key, name);
            }
        }
        Effect::Freed => {
            keys.close_others(a, i);
            if let Some(key) = keys.open(a, i) {
                effects::delete(ctx, key, name);
                W::hand_over(ctx, key, name, now);
            }
        }
        Effect::Release { lock } => {
            let lock = usize::try_from(lock).ok();
            let lock = lock.and_then(|l| Some((a.key(l)?, keys.open(a, l)?)));
            let handed = lock.is_some_and(|(lname, key)| W::hand_over(ctx, key, lname, now));
            if let (false, Some(msg)) = (handed, at(1)) {
                effects::publish(ctx, name, msg, s.cmd == Cmd::SPublish);
            }
        }
        Effect::Message => {
            if let Some(msg) = at(1) {
                effects::publish(ctx, name, msg, s.cmd == Cmd::SPublish);
            }
        }
        Effect::Latch { deadline } => {
            if let Some(key) = keys.open(a, i) {
                effects::set_latch(ctx, key, name, args.get(1) == Some(&Arg::One), deadline, now);
            }
        }
        Effect::Incr { value } => {
            if let Some(key) = keys.open(a, i) {
                token::incr(ctx, key, name, value, now);
            }
        }
        Effect::Turn { owner, pttl } => {
            if let Some(o) = a.arg(usize::try_from(owner).unwrap_or(usize::MAX)) {
                W::keep_turn(ctx, name, rm::bytes(&o), pttl, now);
            }
        }
        Effect::HSet { wake } => {
            let (field, value) = (args.get(1).copied(), args.get(2).copied());
            let consts = Consts::new();
            let mut made = Vec::new();
            let field = field.and_then(|f| a.resolve(f, &consts, plan, &mut made));
            let value = value.and_then(|v| a.resolve(v, &consts, plan, &mut made));
            if let (Some(key), Some(field), Some(value)) = (keys.open(a, i), field, value) {
                effects::hset(ctx, key, name, &[(field, value)]);
                rm::signal_modified(ctx, name);
                if wake {
                    W::hand_over(ctx, key, name, now);
                }
            }
        }
        Effect::HDel => {
            if let (Some(key), Some(field)) = (keys.open(a, i), at(1)) {
                effects::hdel(ctx, key, name, field);
                rm::signal_modified(ctx, name);
            }
        }
    }
}
