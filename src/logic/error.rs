//! Every error reply the module sends, in one type: each variant owns its reply string
//! (`reply`). Clients match on these strings (the prefix is the error class), so they change
//! only with the spec (commands.md, section 3); `ffi/command.rs` (`run`) writes them out for
//! the commands, `module/wait/callbacks.rs` for blocked clients.

use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    // ---- arguments (logic/args) ----
    /// Wrong number of arguments; the command harness turns this into Redis's standard arity
    /// error (`RM_WrongArity`, which names the command).
    Arity,
    /// A numeric argument that is not a plain decimal 64-bit integer.
    NotInteger(&'static str),
    /// `lease-ms` that is zero or negative.
    NotPositive(&'static str),
    /// `timeout-ms` that is negative.
    Negative(&'static str),
    /// A value whose absolute deadline (now + value) does not fit in a 64-bit millisecond clock.
    Overflow(&'static str),
    /// The owner id is the empty string.
    EmptyOwner,
    /// An unknown or repeated option.
    Syntax,
    // ---- the lock key (logic/state) ----
    WrongType,
    /// The owner's field is not a positive integer count.
    CorruptCount,
    // ---- the read-write lock (logic/rwlock) ----
    /// READ / WRITE on a hash that is a plain lock (no `mode` field).
    NotRwLock,
    /// A plain LOCK.* command (no READ / WRITE) on a read-write lock.
    IsRwLock,
    /// The `mode` field is neither `read` nor `write`.
    CorruptMode,
    /// WRITE with WAIT by an owner that holds read holds: it would wait for itself.
    UpgradeWouldDeadlock,
    /// A read hold's timeout key would hash to another slot than the lock (cluster).
    TimeoutKeyCrossSlot,
    /// The user may not write a read hold's timeout key.
    TimeoutKeyDenied,
    // ---- the semaphore (logic/semaphore) ----
    /// A count above what a semaphore may hold (`permits`, `numids`).
    TooLarge(&'static str),
    /// `numids` does not match the ids given.
    SemNumIds,
    /// An empty permit id.
    SemEmptyId,
    /// The same permit id twice in one call.
    SemRepeatedId,
    /// An id that already holds a permit of the semaphore.
    SemIdHeld,
    /// The semaphore key holds a string that is not a decimal integer.
    SemNotInteger,
    /// The permit zset would hash to another slot than the semaphore (cluster).
    SemZsetCrossSlot,
    /// The user may not write the permit zset.
    SemZsetDenied,
    /// The user may not publish on the semaphore's channel.
    SemPublishDenied,
    /// A waiter lost the permissions LOCK.SEMACQUIRE needs while it waited.
    SemGrantDenied,
    // ---- the fencing token (logic/fence, module/token) ----
    /// The token key holds a string that is not a decimal integer.
    TokenNotInteger,
    /// The stored token is `i64::MAX`.
    TokenOverflow,
    /// The token key would hash to another slot than the lock (cluster).
    TokenCrossSlot,
    /// The user may not write the token key.
    TokenDenied,
    // ---- the release message (module/lock/commands.rs) ----
    /// The user may not publish on the lock's channel.
    PublishDenied,
    // ---- waiting (module/wait) ----
    /// A waiter lost the permissions LOCK.ACQUIRE needs while it waited.
    GrantDenied,
    /// The lock's slot moved away while clients waited.
    SlotMoved,
    /// The server became a replica while clients waited.
    NotMaster,
    /// `RM_BlockClient` failed.
    CannotBlock,
    // ---- Redisson scripts (module/redisson) ----
    RedissonArity,
    /// The server does not run EVAL / EVALSHA under that name (renamed or disabled).
    EvalDisabled,
    /// Running the original call in Lua failed.
    LuaFailed,
    /// EVAL / EVALSHA itself is not allowed to `user` (Lua's NOPERM).
    EvalDenied {
        user: String,
        evalsha: bool,
    },
    /// A command inside the script is not allowed to `user` (the `ERR` class Lua gives).
    ScriptDenied {
        user: String,
        cmd: String,
    },
    // ---- the server refuses writes (module/writes): its own reply, verbatim ----
    Refused(String),
    /// The server is out of memory (`maxmemory` with `noeviction`).
    Oom,
    // ---- internal ----
    /// A panic caught in a command (logged).
    Panic,
    /// A panic caught in a blocked client's reply callback.
    PanicInReply,
}

impl Error {
    /// The error reply, as sent to the client.
    pub fn reply(&self) -> Cow<'static, str> {
        use Error::*;
        Cow::Borrowed(match self {
            Arity => "ERR wrong number of arguments",
            NotInteger(name) => return format!("ERR {name} is not an integer or out of range").into(),
            NotPositive(name) => return format!("ERR {name} must be a positive integer").into(),
            Negative(name) => return format!("ERR {name} must not be negative").into(),
            Overflow(name) => return format!("ERR {name} is too large: the deadline would overflow").into(),
            EmptyOwner => "ERR owner must not be empty",
            Syntax => "ERR syntax error",
            WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value",
            CorruptCount => "ERR lock hash holds a hold count that is not a positive integer",
            NotRwLock => "ERR the key holds a plain lock, not a read-write lock: READ / WRITE apply only to read-write locks",
            IsRwLock => "ERR the key holds a read-write lock: add READ or WRITE",
            CorruptMode => "ERR read-write lock hash holds a mode that is neither 'read' nor 'write'",
            UpgradeWouldDeadlock => {
                "ERR this owner holds read holds on the lock: WRITE with WAIT would wait for itself (release the read holds first)"
            }
            TimeoutKeyCrossSlot => {
                "CROSSSLOT the read hold's timeout key would be in another hash slot (the lock name has '{' without a hash tag)"
            }
            TimeoutKeyDenied => "NOPERM this user has no permissions to write the read hold's timeout keys",
            TooLarge(name) => return format!("ERR {name} is too large (at most 2^53-1 permits, 100000 ids)").into(),
            SemNumIds => "ERR numids must be the number of ids that follow it (then only WAIT timeout-ms may come)",
            SemEmptyId => "ERR permit id must not be empty",
            SemRepeatedId => "ERR the same permit id is given twice",
            SemIdHeld => "ERR a permit id given already holds a permit of this semaphore",
            SemNotInteger => "ERR semaphore value is not an integer or out of range",
            SemZsetCrossSlot => {
                "CROSSSLOT the semaphore's permit zset would be in another hash slot (the name has '{' without a hash tag)"
            }
            SemZsetDenied => "NOPERM this user has no permissions to write the semaphore's permit zset",
            SemPublishDenied => "NOPERM this user has no permissions to publish on the semaphore's channel",
            SemGrantDenied => {
                "NOPERM this user lost the permissions LOCK.SEMACQUIRE needs on the semaphore (or its permit zset) while waiting"
            }
            TokenNotInteger => "ERR the lock's fencing token key does not hold an integer",
            TokenOverflow => "ERR the lock's fencing token cannot grow any further",
            TokenCrossSlot => {
                "CROSSSLOT the lock's fencing token key would be in another hash slot (the lock name has '{' without a hash tag)"
            }
            TokenDenied => "NOPERM this user has no permissions to write the lock's fencing token key",
            PublishDenied => {
                "NOPERM this user has no permissions to publish the lock's release message on its channel"
            }
            GrantDenied => {
                "NOPERM this user lost the permissions LOCK.ACQUIRE needs on the lock (or its token key) while waiting"
            }
            SlotMoved => "TRYAGAIN the lock's hash slot moved or is migrating to another node; retry the command",
            NotMaster => "READONLY this server stopped being a master while the client waited for the lock",
            CannotBlock => "ERR lock module could not block the client",
            RedissonArity => "ERR wrong number of arguments for 'lock.redisson' command",
            EvalDisabled => "ERR unknown command: EVAL / EVALSHA are disabled on this server",
            LuaFailed => "ERR lock module could not run the script in Lua",
            EvalDenied { user, evalsha } => {
                let cmd = if *evalsha { "evalsha" } else { "eval" };
                return format!(
                    "NOPERM User {user} has no permissions to run the '{cmd}' command (or to access one of its keys)"
                )
                .into();
            }
            ScriptDenied { user, cmd } => {
                return format!(
                    "ERR ACL failure in script: User {user} has no permissions to run the '{cmd}' command (or to access its keys or channel)"
                )
                .into();
            }
            Refused(msg) => return Cow::Owned(msg.clone()),
            Oom => "OOM command not allowed when used memory > 'maxmemory'.",
            Panic => "ERR lock module internal error (panic caught, see the Redis log)",
            PanicInReply => "ERR lock module internal error (panic caught)",
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reply())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_starts_with_an_error_class() {
        let all = [
            Error::Arity,
            Error::NotInteger("lease-ms"),
            Error::NotPositive("lease-ms"),
            Error::Negative("timeout-ms"),
            Error::Overflow("lease-ms"),
            Error::EmptyOwner,
            Error::Syntax,
            Error::WrongType,
            Error::CorruptCount,
            Error::NotRwLock,
            Error::IsRwLock,
            Error::CorruptMode,
            Error::UpgradeWouldDeadlock,
            Error::TimeoutKeyCrossSlot,
            Error::TimeoutKeyDenied,
            Error::TooLarge("permits"),
            Error::SemNumIds,
            Error::SemEmptyId,
            Error::SemRepeatedId,
            Error::SemIdHeld,
            Error::SemNotInteger,
            Error::SemZsetCrossSlot,
            Error::SemZsetDenied,
            Error::SemPublishDenied,
            Error::SemGrantDenied,
            Error::TokenNotInteger,
            Error::TokenOverflow,
            Error::TokenCrossSlot,
            Error::TokenDenied,
            Error::PublishDenied,
            Error::GrantDenied,
            Error::SlotMoved,
            Error::NotMaster,
            Error::CannotBlock,
            Error::RedissonArity,
            Error::EvalDisabled,
            Error::LuaFailed,
            Error::EvalDenied { user: "u".into(), evalsha: true },
            Error::ScriptDenied { user: "u".into(), cmd: "hset".into() },
            Error::Refused("MISCONF x".into()),
            Error::Oom,
            Error::Panic,
            Error::PanicInReply,
        ];
        for e in all {
            let r = e.reply();
            let class = r.split(' ').next().unwrap_or("");
            assert!(!class.is_empty() && class.chars().all(|c| c.is_ascii_uppercase()), "{r}");
        }
        assert_eq!(
            Error::NotInteger("lease-ms").to_string(),
            "ERR lease-ms is not an integer or out of range"
        );
        assert_eq!(
            Error::EvalDenied { user: "u".into(), evalsha: false }.reply(),
            "NOPERM User u has no permissions to run the 'eval' command (or to access one of its keys)"
        );
    }
}
