//! A natively run script's path, as data.
//!
//! Pure. A kind's transitions (e.g. `lock/script_plans.rs`) read what they need of the keys and
//! answer with a [`Plan`]: the commands the script runs on the path the keys select, in its
//! order, each with its arguments (argv slots or constants) and its effect (what the native code
//! writes in its place), then the reply; or with a [`Quirk`]: the call runs in Lua instead. The
//! one interpreter (`module/scripts/plan.rs`) checks the ACL of every command of the plan and
//! the write refusal at its first write, then applies the effects of the same commands: the ACL
//! model and the writes cannot disagree.

pub use super::script_cmds::Cmd;

/// An argument of a command: a slot of the call (KEYS[i + 1], ARGV[i + 1]) or a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Key(u32),
    Argv(u32),
    One,
    MinusOne,
    Zero,
    /// SET's `px` option.
    Px,
    /// The read-write lock's `mode` field and its two values.
    Mode,
    Read,
    Write,
    /// A string the path derives (a read hold's timeout key, a number the script computes):
    /// [`Plan::made`] `i`.
    Made(u32),
}

/// What the native code writes for one command of the path (or does beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing: a read, a write that changes nothing (DEL of a missing key), or a plan that ends
    /// in Lua.
    None,
    /// HINCRBY (key, field): the count becomes `count`; replicated as HINCRBY +1 (`up`) or -1.
    Count { count: i64, up: bool },
    /// HINCRBY on a key the path deletes next: only its keyspace event.
    CountThenGone,
    /// PEXPIRE (key) > 0: the lease ends at `deadline`; `fresh`: the key was just created.
    Lease { deadline: i64, fresh: bool },
    /// DEL (key), or PEXPIRE <= 0: the key is deleted.
    Delete,
    /// DEL (key) of a lock freed by a script that publishes nothing (the spin lock's): the
    /// key is deleted and the lock goes to the kind's waiters.
    Freed,
    /// PUBLISH / SPUBLISH (channel, message) of a release: the lock at KEYS slot `lock`, just
    /// freed, goes to the kind's waiters first; the message is published when none takes it.
    Release { lock: u32 },
    /// SET (key, value, px, ms): the string with its lease ending at `deadline`.
    Latch { deadline: i64 },
    /// INCR (key): the counter becomes `value`, its TTL kept.
    Incr { value: i64 },
    /// PTTL (key) replied to an owner (ARGV slot `owner`) that will retry: it keeps a place
    /// among the kind's waiters for `pttl` ms.
    Turn { owner: u32, pttl: i64 },
    /// HSET (key, field, value); `wake`: the lock just became shared (a writer's last write
    /// hold went, its read holds stay), so the kind's waiters are offered it (no message).
    HSet { wake: bool },
    /// HDEL (key, field).
    HDel,
    /// PUBLISH / SPUBLISH (channel, message) of a script that publishes on a lock it did not
    /// free (no such lock): the message only.
    Message,
    /// SET (derived key, 1) followed by its PEXPIRE > 0: the string with its lease ending at
    /// `deadline`, written at once (the PEXPIRE step then has no effect of its own).
    Marker { deadline: i64 },
    /// PEXPIRE (derived key) > 0: its lease ends at `deadline`, if the key exists.
    LeaseNamed { deadline: i64 },
    /// DEL (derived key), or its PEXPIRE <= 0: the key is deleted, if it exists.
    DeleteNamed,
}

/// One command of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub cmd: Cmd,
    args: [Arg; 4],
    argc: u8,
    pub effect: Effect,
}

impl Step {
    /// All zero bytes (every first variant): an empty path is cheap to make.
    const EMPTY: Step = Step { cmd: Cmd::Eval, args: [Arg::Key(0); 4], argc: 0, effect: Effect::None };

    /// `cmd` with its arguments (at most four: no script command takes more) and its effect.
    #[inline]
    pub fn new<const N: usize>(cmd: Cmd, args: [Arg; N], effect: Effect) -> Step {
        const { assert!(N <= 4, "a step takes at most four arguments") };
        let mut s = Step { cmd, effect, ..Step::EMPTY };
        for (slot, a) in s.args.iter_mut().zip(args) {
            *slot = a;
        }
        s.argc = u8::try_from(N).unwrap_or(4);
        s
    }

    /// A command that writes nothing.
    #[inline]
    pub fn read<const N: usize>(cmd: Cmd, args: [Arg; N]) -> Step {
        Step::new(cmd, args, Effect::None)
    }

    #[inline]
    pub fn args(&self) -> &[Arg] {
        self.args.get(..usize::from(self.argc)).unwrap_or(&[])
    }

    #[inline]
    pub fn writes(&self) -> bool {
        self.cmd.writes()
    }
}

/// Steps held inline (a path of one lock has at most six), or all on the heap once there are
/// more (a batch). Nothing is allocated for a path that fits.
const INLINE: usize = 6;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps {
    inline: [Step; INLINE],
    len: usize,
    /// Every step once the path outgrew `inline` (then `len` is 0).
    heap: Vec<Step>,
    /// Whether any step writes.
    writes: bool,
}

impl Steps {
    pub fn new() -> Steps {
        Steps { inline: [Step::EMPTY; INLINE], len: 0, heap: Vec::new(), writes: false }
    }

    /// Room for `n` steps in all (a batch: allocated once).
    pub fn reserve(&mut self, n: usize) {
        if n > INLINE {
            self.heap.reserve(n);
        }
    }

    #[inline]
    pub fn push(&mut self, s: Step) {
        self.writes |= s.writes();
        if self.heap.is_empty() {
            if let Some(slot) = self.inline.get_mut(self.len) {
                *slot = s;
                self.len += 1;
                return;
            }
            self.heap.extend_from_slice(&self.inline);
            self.len = 0;
        }
        self.heap.push(s);
    }

    /// Append `cmd` with its arguments and effect, written in place.
    #[inline(always)]
    pub fn add<const N: usize>(&mut self, cmd: Cmd, args: [Arg; N], effect: Effect) {
        if self.heap.is_empty() {
            self.writes |= cmd.writes();
            if let Some(slot) = self.inline.get_mut(self.len) {
                // The slot is still empty: only what differs is written.
                slot.cmd = cmd;
                slot.effect = effect;
                slot.argc = u8::try_from(N).unwrap_or(4);
                for (d, a) in slot.args.iter_mut().zip(args) {
                    *d = a;
                }
                self.len += 1;
                return;
            }
        }
        self.push(Step::new(cmd, args, effect));
    }

    #[inline]
    pub fn as_slice(&self) -> &[Step] {
        if self.heap.is_empty() {
            self.inline.get(..self.len).unwrap_or(&[])
        } else {
            &self.heap
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Step> {
        self.as_slice().iter()
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any step writes.
    pub fn writes(&self) -> bool {
        self.writes
    }

    fn as_mut_slice(&mut self) -> &mut [Step] {
        if self.heap.is_empty() {
            self.inline.get_mut(..self.len).unwrap_or(&mut [])
        } else {
            &mut self.heap
        }
    }
}

impl Default for Steps {
    fn default() -> Steps {
        Steps::new()
    }
}

/// The script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Int(i64),
    Pair(i64, i64),
    /// An array of integers (a batch): [`Plan::ints`].
    Ints,
    /// An error reply carrying the text of ARGV slot `.0` as Redis sends `redis.error_reply`.
    ErrorArg(u32),
}

/// How the path ends once its commands are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    Reply(Reply),
    /// The script fails at a command of the path (an argument it refuses there): a user who
    /// may not run the path gets the ACL error, as in Lua; anyone else gets Lua's own run.
    /// Nothing of the path is written.
    Lua(Quirk),
}

/// The commands of a path and how it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub steps: Steps,
    pub then: Then,
    /// The array a [`Reply::Ints`] replies.
    pub ints: Vec<i64>,
    /// The strings [`Arg::Made`] names, end to end (empty for a path that derives none: the
    /// plain lock's paths allocate nothing here).
    text: Vec<u8>,
    /// Where each made string is in `text`: (start, end).
    spans: Vec<(u32, u32)>,
}

impl Plan {
    pub fn new() -> Plan {
        Plan {
            steps: Steps::new(),
            then: Then::Reply(Reply::Nil),
            ints: Vec::new(),
            text: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// Room for `strings` more made strings of `bytes` bytes together (a walk knows how many it
    /// makes: one allocation instead of a doubling per few keys).
    pub fn reserve_made(&mut self, strings: usize, bytes: usize) {
        self.spans.reserve(strings);
        self.text.reserve(bytes);
    }

    /// A derived string made of `parts` end to end, as an argument.
    pub fn made(&mut self, parts: &[&[u8]]) -> Arg {
        let start = self.text.len();
        for p in parts {
            self.text.extend_from_slice(p);
        }
        self.push_span(start)
    }

    /// The decimal text of `n` (a number the script computes), as an argument.
    pub fn made_int(&mut self, n: i64) -> Arg {
        let start = self.text.len();
        let mut buf = itoa_buf(n);
        self.text.append(&mut buf);
        self.push_span(start)
    }

    fn push_span(&mut self, start: usize) -> Arg {
        let (s, e) =
            (u32::try_from(start).unwrap_or(u32::MAX), u32::try_from(self.text.len()).unwrap_or(u32::MAX));
        self.spans.push((s, e));
        Arg::Made(u32::try_from(self.spans.len() - 1).unwrap_or(u32::MAX))
    }

    /// The bytes of made string `i`.
    pub fn made_text(&self, i: u32) -> Option<&[u8]> {
        let &(s, e) = self.spans.get(usize::try_from(i).ok()?)?;
        self.text.get(usize::try_from(s).ok()?..usize::try_from(e).ok()?)
    }

    /// How many strings the path derives.
    pub fn made_count(&self) -> usize {
        self.spans.len()
    }

    /// Append `cmd` with its arguments (at most four) and its effect.
    #[inline(always)]
    pub fn step<const N: usize>(&mut self, cmd: Cmd, args: [Arg; N], effect: Effect) {
        const { assert!(N <= 4, "a step takes at most four arguments") };
        self.steps.add(cmd, args, effect);
    }

    /// Append `cmd`, which writes nothing.
    #[inline(always)]
    pub fn read<const N: usize>(&mut self, cmd: Cmd, args: [Arg; N]) {
        self.step(cmd, args, Effect::None);
    }

    /// Whether any command of the path writes.
    pub fn writes(&self) -> bool {
        self.steps.writes()
    }

    /// The path ends in Lua: none of its effects is written.
    pub fn drop_effects(&mut self) {
        for s in self.steps.as_mut_slice() {
            s.effect = Effect::None;
        }
    }

    /// Give the last `cmd` of the path `effect` (a path decides some effects once it knows how
    /// it ends).
    pub fn set_effect(&mut self, cmd: Cmd, effect: Effect) {
        if let Some(s) = self.steps.as_mut_slice().iter_mut().rev().find(|s| s.cmd == cmd) {
            s.effect = effect;
        }
    }

    /// Whether the native code does anything for the path (any effect).
    pub fn has_effects(&self) -> bool {
        self.steps.iter().any(|s| !matches!(s.effect, Effect::None))
    }
}

impl Default for Plan {
    fn default() -> Plan {
        Plan::new()
    }
}

fn itoa_buf(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// The unlock latch, as the 3.24+ unlocks read it with GET (every kind's latch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latch {
    Absent,
    /// A string: the script replies `tonumber(value)` (nil when Lua does not convert it).
    Value(Option<i64>),
    /// Another type (or a string that cannot be read).
    WrongType,
}

/// Why a call runs in Lua: what would make the script raise an error, or behave in a way the
/// native code does not reproduce. Lua then gives its own reply and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quirk {
    /// A key of another type where the script uses a hash command (WRONGTYPE).
    WrongType,
    /// The owner's count is not an integer (HINCRBY fails).
    CountNotInteger,
    /// The owner's count +-1 overflows (HINCRBY fails).
    CountOverflow,
    /// The lease is not an integer where the script reaches PEXPIRE with it.
    LeaseNotInteger,
    /// now + a lease or latch time overflows (PEXPIRE / SET fail).
    DeadlineOverflow,
    /// The latch time is not a positive integer where the script reaches SET ... PX with it.
    LatchMs,
    /// The latch key is not a string (GET fails).
    LatchWrongType,
    /// The token counter is the lock key itself (INCR fails on the hash, half-way through).
    TokenIsLock,
    /// The token counter is a string that is not an integer (INCR fails).
    TokenNotInteger,
    /// The token counter is not a string (INCR fails).
    TokenWrongType,
    /// The token counter + 1 overflows (INCR fails).
    TokenOverflow,
    /// SPUBLISH to a channel outside the script's slot in a cluster (Lua raises an error after
    /// the lock was deleted).
    CrossSlotPublish,
    /// The operation's layout lacks a slot its transitions use (a table error; never for the
    /// built-in rows): nothing is run natively.
    Layout,
    /// A number the script formats or computes through Lua doubles is outside the range where
    /// every server writes it as plain digits (a hold count of 10^14 or more, a TTL of 10^15 ms
    /// or more, a count Lua's `tonumber` reads as a fraction, infinity or NaN).
    LuaNumber,
    /// A walk over more hold timeout keys than the module walks in one call.
    WalkTooLong,
    /// A key the script derives (a read hold's timeout key) is one of the call's own keys, or
    /// outside the script's slot in a cluster.
    DerivedKey,
    /// An error text from ARGV that the native reply would not carry byte for byte (empty, a
    /// leading `-`, or a byte outside printable ASCII).
    ErrorText,
    /// 1affef78's renewal addresses KEYS[n + 1] past the last key: Lua concatenates nil and
    /// raises an error (after the PEXPIREs made so far).
    ScriptBug,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_follow_the_declaration_order() {
        for (i, c) in Cmd::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?}");
            assert_eq!(Cmd::TEXT[i], c.text());
        }
        assert!(!Cmd::Publish.writes() && Cmd::Set.writes() && !Cmd::Get.writes());
    }

    #[test]
    fn steps_spill_to_the_heap_in_order() {
        let mut s = Steps::new();
        s.reserve(10);
        for i in 0..10u32 {
            s.push(Step::read(Cmd::Get, [Arg::Key(i)]));
        }
        assert_eq!(s.len(), 10);
        let keys: Vec<Arg> = s.iter().map(|x| x.args()[0]).collect();
        assert_eq!(keys, (0..10).map(Arg::Key).collect::<Vec<_>>());
        let w = Step::new(Cmd::Set, [Arg::Key(0), Arg::Zero, Arg::Px, Arg::Argv(4)], Effect::None);
        assert_eq!(w.args(), [Arg::Key(0), Arg::Zero, Arg::Px, Arg::Argv(4)]);
        assert!(w.writes());
    }
}
