//! A small lock client on top of LOCK.*, the way a service would use it:
//! Redisson-style owner ids (`<client-uuid>:<thread-id>`), a blocking acquire with a server-side
//! FIFO wait, a watchdog thread that renews the lease with LOCK.RENEW, and a release.
//!
//! Run against a server with the module (`make run` in another terminal):
//!     cargo run --example client -- redis://127.0.0.1:6379/ orders:42

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const LEASE_MS: i64 = 30_000;

/// One id per process, plus the thread id, like Redisson's `<uuid>:<threadId>`.
fn owner_id(client_id: &uuid::Uuid) -> String {
    let thread = format!("{:?}", thread::current().id());
    let digits: String = thread.chars().filter(char::is_ascii_digit).collect();
    format!("{client_id}:{digits}")
}

fn main() -> redis::RedisResult<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let key = args.next().unwrap_or_else(|| "example:lock".into());
    let client = redis::Client::open(url)?;
    let client_id = uuid::Uuid::new_v4();
    let owner = owner_id(&client_id);

    // Block up to 10 s in the lock's FIFO queue; nil means we hold it.
    let mut con = client.get_connection()?;
    let got: Option<i64> = redis::cmd("LOCK.ACQUIRE")
        .arg(&key)
        .arg(&owner)
        .arg(LEASE_MS)
        .arg("WAIT")
        .arg(10_000)
        .query(&mut con)?;
    if let Some(pttl) = got {
        println!("{key} is still held by someone else ({pttl} ms left); giving up");
        return Ok(());
    }
    println!("{owner} holds {key}");

    // Watchdog: renew every lease/3 until told to stop; a 0 reply means the lock was lost.
    let stop = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (stop, key, owner) = (stop.clone(), key.clone(), owner.clone());
        let mut con = client.get_connection()?;
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(200));
                let renewed: i64 =
                    redis::cmd("LOCK.RENEW").arg(&key).arg(&owner).arg(LEASE_MS).query(&mut con).unwrap_or(0);
                if renewed == 0 {
                    eprintln!("lost {key}");
                    return;
                }
            }
        })
    };

    thread::sleep(Duration::from_millis(500)); // the critical section

    stop.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    let released: Option<i64> = redis::cmd("LOCK.RELEASE").arg(&key).arg(&owner).query(&mut con)?;
    match released {
        Some(1) => println!("released {key}; the next waiter (if any) now holds it"),
        Some(_) => println!("released one of several holds on {key}"),
        None => println!("{key} was not ours any more (lease expired?)"),
    }
    Ok(())
}
