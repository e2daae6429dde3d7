//! A script operation's KEYS / ARGV layout: the roles a slot may have ([`Role`]), the role of each slot, fixed or repeated per unit,
//! with each role's position worked out when the layout is made (const). Pure.

/// What a KEYS or ARGV slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// KEYS: the lock key.
    Lock,
    /// KEYS: the channel a release message goes to.
    Channel,
    /// KEYS: the unlock latch key.
    Latch,
    /// KEYS: the fencing-token counter.
    Token,
    /// ARGV: the release message.
    Message,
    /// ARGV: a lease in ms (PEXPIRE's argument); parsed, `None` when not an integer.
    Lease,
    /// ARGV: the owner id.
    Owner,
    /// ARGV: the publish command; only PUBLISH and SPUBLISH match.
    PublishCmd,
    /// ARGV: the latch's time in ms (SET ... PX); parsed, `None` when not a positive integer.
    LatchMs,
    /// KEYS: a reader's own timeout-key prefix (`{K}:<owner>:rwlock_timeout`; hold n is
    /// `<prefix>:<n>`).
    Prefix,
    /// KEYS: the prefix of every derived key of a lock (`{K}`; hold n of field f is
    /// `<prefix>:<f>:rwlock_timeout:<n>`).
    KeyPrefix,
    /// ARGV: the caller's writer field (`<owner>:write`) beside its reader field.
    Writer,
    /// KEYS: a semaphore's zset of held permits (`{K}:timeout`).
    Permits,
    /// ARGV: a number of permits (to take, return, add or set).
    Count,
    /// ARGV: a permit's lease end (a zset score, client-clock ms).
    Score,
    /// ARGV: the caller's clock, unix ms.
    Now,
    /// ARGV: the score of a permit without a lease (`922337203685477`).
    NoLease,
    /// ARGV: a time to live in ms (SET ... PX).
    Ttl,
    /// ARGV: a permit id.
    Id,
    /// KEYS: a fair lock's wait queue (a list of owner ids).
    Queue,
    /// KEYS: a fair lock's waiter deadlines (a zset, client-clock ms).
    Deadlines,
    /// KEYS: the prefix of a fair lock's per-waiter channels (`<prefix>:<owner>`).
    ChannelPrefix,
    /// ARGV: the ms a fair lock's waiter may wait (each deadline's share).
    Wait,
    /// ARGV: the error text a non-reentrant acquire replies on re-entry.
    ErrText,
}

impl Role {
    /// How many roles there are.
    pub const COUNT: usize = 24;

    /// Whether the role is a KEYS slot (else an ARGV slot).
    pub const fn is_key(self) -> bool {
        matches!(
            self,
            Role::Lock
                | Role::Channel
                | Role::Latch
                | Role::Token
                | Role::Prefix
                | Role::KeyPrefix
                | Role::Permits
                | Role::Queue
                | Role::Deadlines
                | Role::ChannelPrefix
        )
    }
}

/// Marks a role a layout lacks, in [`Layout`]'s position tables.
const NONE: u8 = u8::MAX;

/// The roles of a call's slots: fixed KEYS and ARGV, then for a batch a tail of KEYS and ARGV
/// roles repeated once per unit (at least once). Parsed roles (lease, latch ms, publish
/// command) are read from the fixed ARGV. A `counted` batch has, after the fixed ARGV, one
/// group per unit: a count m, then m owner fields (Redisson 4.4's read renewal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub keys: &'static [Role],
    pub args: &'static [Role],
    pub each: Option<(&'static [Role], &'static [Role])>,
    pub counted: bool,
    /// The repeated tail is ARGV only (fixed KEYS): its units are counted from the arguments.
    pub args_tail: bool,
    /// Each role's index among the fixed KEYS or ARGV (by the role's side), then within a unit
    /// of the tail, by `Role as usize`; computed when the layout is made, so a transition finds
    /// its slots without a search.
    pub(super) fixed_at: [u8; Role::COUNT],
    pub(super) each_at: [u8; Role::COUNT],
}

impl Layout {
    pub const fn fixed(keys: &'static [Role], args: &'static [Role]) -> Layout {
        Layout {
            keys,
            args,
            each: None,
            counted: false,
            args_tail: false,
            fixed_at: positions(keys, args),
            each_at: [NONE; Role::COUNT],
        }
    }

    /// Fixed KEYS and ARGV, then `each_args` once per unit (at least once): a list of ids.
    pub const fn args_tail(
        keys: &'static [Role],
        args: &'static [Role],
        each_args: &'static [Role],
    ) -> Layout {
        Layout {
            keys,
            args,
            each: Some((&[], each_args)),
            counted: false,
            args_tail: true,
            fixed_at: positions(keys, args),
            each_at: positions(&[], each_args),
        }
    }

    /// Fixed slots, then `each_keys` / `each_args` repeated once per unit.
    pub const fn repeated(
        keys: &'static [Role],
        args: &'static [Role],
        each_keys: &'static [Role],
        each_args: &'static [Role],
    ) -> Layout {
        let each = Some((each_keys, each_args));
        Layout {
            keys,
            args,
            each,
            counted: false,
            args_tail: false,
            fixed_at: positions(keys, args),
            each_at: positions(each_keys, each_args),
        }
    }

    /// Fixed slots, then `each_keys` repeated once per unit, and per unit in ARGV (after the
    /// fixed ones) a count m followed by m owner fields.
    pub const fn counted(keys: &'static [Role], args: &'static [Role], each_keys: &'static [Role]) -> Layout {
        Layout {
            keys,
            args,
            each: Some((each_keys, &[])),
            counted: true,
            args_tail: false,
            fixed_at: positions(keys, args),
            each_at: positions(each_keys, &[]),
        }
    }
}

/// The first index of each role in `keys` (key roles) or `args` (argument roles).
#[allow(clippy::indexing_slicing, reason = "const evaluation: out of range fails the build")]
const fn positions(keys: &[Role], args: &[Role]) -> [u8; Role::COUNT] {
    let mut at = [NONE; Role::COUNT];
    let mut i = 0;
    while i < keys.len() {
        if keys[i].is_key() && at[keys[i] as usize] == NONE {
            at[keys[i] as usize] = i as u8;
        }
        i += 1;
    }
    let mut i = 0;
    while i < args.len() {
        if !args[i].is_key() && at[args[i] as usize] == NONE {
            at[args[i] as usize] = i as u8;
        }
        i += 1;
    }
    at
}

pub(super) fn position(table: &[u8; Role::COUNT], role: Role) -> Option<usize> {
    table.get(role as usize).copied().filter(|p| *p != NONE).map(usize::from)
}
