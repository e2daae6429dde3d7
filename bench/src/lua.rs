//! Our own Lua implementation of Redisson's RLock scripts, written from the algorithm description
//! (shared/research/redisson.md §2.1), with Redisson's keys and arguments, sent with EVALSHA.
//! Plus the client-side pieces of a Redisson RLock: owner ids, channel names, the unlock latch and
//! its fire-and-forget DEL.

use rand::Rng;
use redis::Value;

/// Our own Lua implementation of the RLock scripts, shared with the interop tests (`clients/python/src/redislock/lua/`):
/// acquire (KEYS lock; ARGV lease, owner), unlock with the 3.24+ idempotency latch (KEYS lock,
/// channel, latch; ARGV message, lease, owner, publish command, latch PX) and the 3.22 unlock
/// without latch (KEYS lock, channel; ARGV message, lease, owner, publish command).
pub const ACQUIRE: &str = testkit::scripts::ACQUIRE;
pub const UNLOCK: &str = testkit::scripts::UNLOCK_LATCH;
pub const UNLOCK_NO_LATCH: &str = testkit::scripts::UNLOCK;

/// Latch PX at Redisson's defaults: (timeout 3000 + retryDelay 1000..2000) x 4 attempts.
pub const LATCH_PX: &str = "16000";

#[derive(Clone)]
pub struct Shas {
    pub acquire: String,
    pub unlock: String,
    pub unlock_no_latch: String,
}

pub fn load(con: &mut redis::Connection) -> Shas {
    let mut l =
        |s: &str| -> String { redis::cmd("SCRIPT").arg("LOAD").arg(s).query(con).expect("SCRIPT LOAD") };
    Shas { acquire: l(ACQUIRE), unlock: l(UNLOCK), unlock_no_latch: l(UNLOCK_NO_LATCH) }
}

/// `redisson_lock__channel:{n}`, or `redisson_lock__channel:n` when `n` already has a `{`.
pub fn channel(key: &str) -> String {
    if key.contains('{') {
        format!("redisson_lock__channel:{key}")
    } else {
        format!("redisson_lock__channel:{{{key}}}")
    }
}

pub fn latch_key(key: &str, request_id: &str) -> String {
    if key.contains('{') {
        format!("redisson_unlock_latch:{key}:{request_id}")
    } else {
        format!("redisson_unlock_latch:{{{key}}}:{request_id}")
    }
}

/// A Redisson-like owner id `<client uuid>:<thread id>`.
pub fn owner(client: usize, thread: usize) -> String {
    let mut r = rand::thread_rng();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}:{}",
        r.gen::<u32>(),
        r.gen::<u16>(),
        r.gen::<u16>() & 0xfff,
        (r.gen::<u16>() & 0x3fff) | 0x8000,
        (r.gen::<u64>() & 0xffff_ffff_ffff) ^ client as u64,
        thread + 1
    )
}

/// 16 random bytes as hex, like `ServiceManager.generateId`.
pub fn request_id() -> String {
    let mut r = rand::thread_rng();
    format!("{:016x}{:016x}", r.gen::<u64>(), r.gen::<u64>())
}

pub fn acquire_cmd(sha: &str, key: &str, lease: u64, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha).arg(1).arg(key).arg(lease).arg(owner);
    c
}

pub fn unlock_cmd(sha: &str, key: &str, chan: &str, latch: &str, lease: u64, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha).arg(3).arg(key).arg(chan).arg(latch).arg(0).arg(lease).arg(owner).arg("PUBLISH").arg(LATCH_PX);
    c
}

pub fn unlock_no_latch_cmd(sha: &str, key: &str, chan: &str, lease: u64, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha).arg(2).arg(key).arg(chan).arg(0).arg(lease).arg(owner).arg("PUBLISH");
    c
}

/// A command connection used the way a Redisson client uses it: every call is one blocking round
/// trip, except the `DEL <latch>` after an unlock, which is sent without waiting; its reply is
/// read before the reply of the next call.
pub struct Client {
    pub con: redis::Connection,
    pending: usize,
    /// commands sent so far
    pub sent: u64,
}

impl Client {
    pub fn new(con: redis::Connection) -> Client {
        Client { con, pending: 0, sent: 0 }
    }

    pub fn call(&mut self, cmd: &redis::Cmd) -> Value {
        self.sent += 1;
        self.con.send_packed_command(&cmd.get_packed_command()).expect("send");
        while self.pending > 0 {
            self.con.recv_response().expect("pending reply");
            self.pending -= 1;
        }
        self.con.recv_response().expect("reply")
    }

    pub fn send_no_wait(&mut self, cmd: &redis::Cmd) {
        self.sent += 1;
        self.con.send_packed_command(&cmd.get_packed_command()).expect("send");
        self.pending += 1;
    }

    pub fn drain(&mut self) {
        while self.pending > 0 {
            self.con.recv_response().expect("pending reply");
            self.pending -= 1;
        }
    }

    /// Redisson's acquire: None = acquired, Some(pttl) = held by someone else.
    pub fn lua_acquire(&mut self, sha: &Shas, key: &str, lease: u64, owner: &str) -> Option<i64> {
        match self.call(&acquire_cmd(&sha.acquire, key, lease, owner)) {
            Value::Nil => None,
            Value::Int(n) => Some(n),
            v => panic!("acquire script replied {v:?}"),
        }
    }

    /// Redisson's unlock (with latch) followed by the fire-and-forget `DEL <latch>`.
    pub fn lua_unlock(&mut self, sha: &Shas, key: &str, chan: &str, lease: u64, owner: &str) -> Value {
        let latch = latch_key(key, &request_id());
        let v = self.call(&unlock_cmd(&sha.unlock, key, chan, &latch, lease, owner));
        let mut del = redis::cmd("DEL");
        del.arg(&latch);
        self.send_no_wait(&del);
        v
    }
}
