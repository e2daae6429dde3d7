mod common;
use common::Server;

#[test]
fn module_loads_and_answers() {
    let s = Server::start();
    let mut c = s.conn();
    let r: Option<i64> = redis::cmd("LOCK.ACQUIRE").arg("k").arg("me").arg(30000).query(&mut c).unwrap();
    assert_eq!(r, None);
    let count: i64 = redis::cmd("HGET").arg("k").arg("me").query(&mut c).unwrap();
    assert_eq!(count, 1);
}
