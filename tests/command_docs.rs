//! docs/commands.md and the server's COMMAND DOCS describe the same commands with the same
//! arguments: every `### LOCK.X ...` heading of the page is compared with the synopsis built
//! from `COMMAND DOCS` (names, tokens, optional and repeated arguments, as the Redis docs write
//! them), and the module's commands (`COMMAND LIST FILTERBY MODULE lock`) are exactly the page's.

mod common;
use common::*;

use resp::{Conn, R};
use std::collections::BTreeMap;
use testkit::cmd;

/// The value of `field` in a RESP2 flat map (`[k1, v1, k2, v2, ...]`) or a RESP3 map.
fn field<'a>(r: &'a R, name: &str) -> Option<&'a R> {
    match r {
        R::Map(pairs) => pairs.iter().find(|(k, _)| k.str() == name).map(|(_, v)| v),
        R::Arr(items) => items.chunks(2).find(|p| p[0].str() == name).map(|p| &p[1]),
        _ => None,
    }
}

fn flags(arg: &R) -> Vec<String> {
    field(arg, "flags").map(|f| f.arr().iter().map(R::str).collect()).unwrap_or_default()
}

/// One argument as the Redis docs write it: `name`, `TOKEN name`, `TOKEN` (pure token),
/// `A | B` (one of), `name [name ...]` (repeated), inside `[...]` when optional.
fn render(arg: &R) -> String {
    let name = field(arg, "name").map(R::str).unwrap_or_default();
    let kind = field(arg, "type").map(R::str).unwrap_or_default();
    let token = field(arg, "token").map(R::str);
    let fl = flags(arg);
    let (optional, multiple) = (fl.iter().any(|f| f == "optional"), fl.iter().any(|f| f == "multiple"));
    let one = match (kind.as_str(), token) {
        ("oneof", _) => {
            let subs = field(arg, "arguments").map(|a| a.arr().iter().map(render).collect::<Vec<_>>());
            subs.unwrap_or_default().join(" | ")
        }
        ("pure-token", Some(t)) => t,
        (_, Some(t)) => format!("{t} {name}"),
        (_, None) => name,
    };
    match (optional, multiple) {
        (false, false) => one,
        (true, false) => format!("[{one}]"),
        (false, true) => format!("{one} [{one} ...]"),
        (true, true) => format!("[{one} ...]"),
    }
}

/// `LOCK.X arg ...` from the server's COMMAND DOCS of `name`.
fn synopsis(c: &mut Conn, name: &str) -> String {
    let docs = cmd!(c, "COMMAND", "DOCS", name);
    let doc = match &docs {
        R::Arr(items) if items.len() == 2 => items[1].clone(),
        R::Map(pairs) if pairs.len() == 1 => pairs[0].1.clone(),
        other => panic!("COMMAND DOCS {name}: {other:?}"),
    };
    let args = field(&doc, "arguments").map(|a| a.arr().to_vec()).unwrap_or_default();
    std::iter::once(name.to_uppercase()).chain(args.iter().map(render)).collect::<Vec<_>>().join(" ")
}

/// The `### LOCK.X ...` headings of docs/commands.md, by command name.
fn documented() -> BTreeMap<String, String> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md")).unwrap();
    page.lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter(|h| h.starts_with("LOCK."))
        .map(|h| (h.split(' ').next().unwrap().to_lowercase(), h.trim().to_string()))
        .collect()
}

#[test]
fn the_commands_page_and_command_docs_agree() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let docs = documented();
    let mut served: Vec<String> =
        cmd!(c, "COMMAND", "LIST", "FILTERBY", "MODULE", "lock").arr().iter().map(R::str).collect();
    served.sort();
    assert_eq!(served, docs.keys().cloned().collect::<Vec<_>>(), "commands served vs documented");
    for (name, heading) in &docs {
        assert_eq!(&synopsis(&mut c, name), heading, "docs/commands.md heading vs COMMAND DOCS of {name}");
    }
}

/// The check can fail: a heading that differs from COMMAND DOCS is told apart.
#[test]
fn a_wrong_heading_is_caught() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    assert_eq!(synopsis(&mut c, "lock.renew"), "LOCK.RENEW key owner lease-ms [READ | WRITE]");
    assert_ne!(synopsis(&mut c, "lock.acquire"), "LOCK.ACQUIRE key owner lease-ms [WAIT timeout-ms]");
}
