//! The commands the module checks on a client's behalf (a natively run script's path, the EVAL /
//! EVALSHA the client sent, LOCK.ACQUIRE for a waiter): their names as the ACL checks them and
//! whether the server refuses them while it refuses writes. `plan.rs` builds paths of them.

/// A command the module checks on a client's behalf: the ones a script runs, the EVAL / EVALSHA
/// the client sent, and LOCK.ACQUIRE (re-checked for waiters at grant time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    Eval,
    EvalSha,
    Exists,
    HExists,
    HIncrBy,
    PExpire,
    PTtl,
    Del,
    Get,
    Set,
    Incr,
    Publish,
    SPublish,
    LockAcquire,
    HGet,
    HSet,
    HDel,
    HLen,
    HKeys,
    LockSemAcquire,
    ZRangeByScore,
    ZRem,
    IncrBy,
    DecrBy,
    ZAdd,
    ZRange,
    ZScore,
    ZCount,
    ZIncrBy,
    LIndex,
    LPop,
    RPush,
    LRem,
    LRange,
    Decr,
}

impl Cmd {
    /// Every command, in declaration order (`ALL[c as usize] == c`).
    pub const ALL: [Cmd; 35] = [
        Cmd::Eval,
        Cmd::EvalSha,
        Cmd::Exists,
        Cmd::HExists,
        Cmd::HIncrBy,
        Cmd::PExpire,
        Cmd::PTtl,
        Cmd::Del,
        Cmd::Get,
        Cmd::Set,
        Cmd::Incr,
        Cmd::Publish,
        Cmd::SPublish,
        Cmd::LockAcquire,
        Cmd::HGet,
        Cmd::HSet,
        Cmd::HDel,
        Cmd::HLen,
        Cmd::HKeys,
        Cmd::LockSemAcquire,
        Cmd::ZRangeByScore,
        Cmd::ZRem,
        Cmd::IncrBy,
        Cmd::DecrBy,
        Cmd::ZAdd,
        Cmd::ZRange,
        Cmd::ZScore,
        Cmd::ZCount,
        Cmd::ZIncrBy,
        Cmd::LIndex,
        Cmd::LPop,
        Cmd::RPush,
        Cmd::LRem,
        Cmd::LRange,
        Cmd::Decr,
    ];

    /// The name of each command of [`Cmd::ALL`], same order.
    pub const TEXT: [&'static [u8]; Cmd::ALL.len()] = {
        let mut out: [&[u8]; Cmd::ALL.len()] = [b""; Cmd::ALL.len()];
        let mut i = 0;
        while i < out.len() {
            #[allow(clippy::indexing_slicing, reason = "const evaluation: out of range fails the build")]
            {
                out[i] = Cmd::ALL[i].text();
            }
            i += 1;
        }
        out
    };

    /// The command's name, as the ACL checks it.
    pub const fn text(self) -> &'static [u8] {
        match self {
            Cmd::Eval => b"eval",
            Cmd::EvalSha => b"evalsha",
            Cmd::Exists => b"exists",
            Cmd::HExists => b"hexists",
            Cmd::HIncrBy => b"hincrby",
            Cmd::PExpire => b"pexpire",
            Cmd::PTtl => b"pttl",
            Cmd::Del => b"del",
            Cmd::Get => b"get",
            Cmd::Set => b"set",
            Cmd::Incr => b"incr",
            Cmd::Publish => b"publish",
            Cmd::SPublish => b"spublish",
            Cmd::LockAcquire => b"lock.acquire",
            Cmd::HGet => b"hget",
            Cmd::HSet => b"hset",
            Cmd::HDel => b"hdel",
            Cmd::HLen => b"hlen",
            Cmd::HKeys => b"hkeys",
            Cmd::LockSemAcquire => b"lock.semacquire",
            Cmd::ZRangeByScore => b"zrangebyscore",
            Cmd::ZRem => b"zrem",
            Cmd::IncrBy => b"incrby",
            Cmd::DecrBy => b"decrby",
            Cmd::ZAdd => b"zadd",
            Cmd::ZRange => b"zrange",
            Cmd::ZScore => b"zscore",
            Cmd::ZCount => b"zcount",
            Cmd::ZIncrBy => b"zincrby",
            Cmd::LIndex => b"lindex",
            Cmd::LPop => b"lpop",
            Cmd::RPush => b"rpush",
            Cmd::LRem => b"lrem",
            Cmd::LRange => b"lrange",
            Cmd::Decr => b"decr",
        }
    }

    /// Whether the server refuses the command while it refuses writes (PUBLISH does not write).
    pub const fn writes(self) -> bool {
        matches!(
            self,
            Cmd::HIncrBy
                | Cmd::PExpire
                | Cmd::Del
                | Cmd::Set
                | Cmd::Incr
                | Cmd::LockAcquire
                | Cmd::LockSemAcquire
                | Cmd::ZRem
                | Cmd::IncrBy
                | Cmd::DecrBy
                | Cmd::ZAdd
                | Cmd::HSet
                | Cmd::HDel
                | Cmd::ZIncrBy
                | Cmd::LPop
                | Cmd::RPush
                | Cmd::LRem
                | Cmd::Decr
        )
    }
}
