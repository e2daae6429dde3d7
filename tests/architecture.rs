//! The layout of src/ as a test (docs/internals.md): it scans the sources and fails when a
//! layering rule regresses.
//!
//! - `src/logic/` is pure: no `redis_module`, no `unsafe`, no import of another layer.
//! - `src/registry/` is a leaf: it imports nothing from `src/module/` (the glue).
//! - Kinds: a kind is a folder in both `src/logic/` and `src/module/` (`lock`, ...), apart from
//!   the folders every kind shares ([`SHARED`]). No kind imports another kind, and the waiting
//!   core (`logic/wait`, `module/wait`) imports no kind: it is generic over them (`lib.rs` lists
//!   the kinds). A kind's logic is pure like the rest of `src/logic/`.
//! - No import cycle between files (modules), `lib.rs` aside (it wires everything).
//! - `unsafe`, `extern "C"`, `raw::` and `RedisModule_` live in `src/ffi/`; the files that still
//!   hold some are listed in [`NOT_YET_IN_FFI`], a list that may only shrink (the test fails when
//!   a listed file no longer needs its entry, so the list is kept exact).
//! - Raw pointers live in `src/ffi/` too ([`pointer_violations`]): elsewhere the server's
//!   objects are the opaque handles of [`HANDLES`], which no `as` cast makes or turns into an
//!   integer ([`handle_violations`]). Their field (`ctx.0`, `RStr(p)`) cannot be used outside
//!   `src/ffi/`: it is private to it, which the compiler enforces; [`handle_declarations`]
//!   checks that it stays private.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Folders in both `src/logic/` and `src/module/` that are not kinds: the code every kind shares.
const SHARED: &[&str] = &["wait", "scripts"];

/// The kinds: folders present in both `logic/` and `module/`, but the shared ones.
fn kinds(sources: &[Source]) -> BTreeSet<String> {
    let folders = |layer: &str| -> BTreeSet<String> {
        sources
            .iter()
            .filter_map(|s| s.rel.strip_prefix(layer)?.split_once('/').map(|(f, _)| f.to_string()))
            .collect()
    };
    folders("logic/")
        .intersection(&folders("module/"))
        .filter(|f| !SHARED.contains(&f.as_str()))
        .cloned()
        .collect()
}

/// The kind a module path belongs to (`logic::lock::state` -> `lock`), if any.
fn kind_of<'a>(module: &str, kinds: &'a BTreeSet<String>) -> Option<&'a String> {
    let mut parts = module.split("::");
    let (layer, folder) = (parts.next()?, parts.next()?);
    if layer != "logic" && layer != "module" {
        return None;
    }
    kinds.iter().find(|k| k.as_str() == folder)
}

/// Files outside `src/ffi/` that still make raw API calls or hold unsafe code.
const NOT_YET_IN_FFI: &[&str] = &[];

/// The handle types `src/ffi/` makes (contexts, strings, blocked clients, timers, the command
/// filter): newtypes around a raw pointer or id, whose field is private to `src/ffi/`.
const HANDLES: &[&str] = &["Ctx", "RStr", "StaticStr", "Client", "TimerId", "Filter"];

/// Text that names, makes or casts to a raw pointer (or takes one out of a reference or box).
const RAW_POINTER: &[&str] =
    &["*mut ", "*const ", "null_mut", "ptr::null", "as *", "as_ptr(", "as_mut_ptr(", "addr_of", "into_raw"];

/// Integer types a pointer (or a handle, were it an alias of one) could be cast to.
const INTEGERS: &[&str] =
    &["usize", "isize", "u8", "u16", "u32", "u64", "u128", "i8", "i16", "i32", "i64", "i128"];

struct Source {
    /// Path under src/, with `/`.
    rel: String,
    /// Module path, e.g. `module::wait` (`lib.rs` is ``).
    module: String,
    /// The text without the `#[cfg(test)]` tests module.
    code: String,
}

/// `src/`, or the folder in `ARCH_SRC` (to check another tree, e.g. an older commit's).
fn src_dir() -> PathBuf {
    match std::env::var_os("ARCH_SRC") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_path(rel: &str) -> String {
    let stem = rel.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" {
        String::new()
    } else {
        stem.replace('/', "::")
    }
}

fn strip_tests(text: &str) -> String {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text.get(..i).unwrap_or(text).to_string(),
        None => text.to_string(),
    }
}

fn sources_in(root: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    walk(root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            let text = fs::read_to_string(&p).unwrap();
            Source { module: module_path(&rel), code: strip_tests(&text), rel }
        })
        .collect()
}

/// Lines without `//` comments (the rules are about code, not prose).
fn code_lines(code: &str) -> impl Iterator<Item = &str> {
    code.lines().map(|l| match l.find("//") {
        Some(i) if !l.get(..i).unwrap_or("").contains('"') => l.get(..i).unwrap_or(""),
        _ => l,
    })
}

/// Every `crate::a::b` / `super::a` path the file names, `{a, b}` groups expanded one level,
/// resolved to absolute module paths (without `crate::`).
fn references(src: &Source) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let is_mod_file = src.rel.ends_with("mod.rs") || src.rel == "lib.rs";
    let parent = {
        let mut parts: Vec<&str> = src.module.split("::").filter(|s| !s.is_empty()).collect();
        if !is_mod_file {
            parts.pop();
        }
        parts.join("::")
    };
    for line in code_lines(&src.code) {
        for (prefix, base) in [("crate::", String::new()), ("super::", parent.clone())] {
            let mut rest = line;
            while let Some(i) = rest.find(prefix) {
                let before = rest.get(..i).unwrap_or("");
                rest = rest.get(i + prefix.len()..).unwrap_or("");
                if before.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let path: String =
                    rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                let path = path.trim_end_matches(':').to_string();
                let join = |p: &str| if base.is_empty() { p.to_string() } else { format!("{base}::{p}") };
                let after = rest.get(path.len()..).unwrap_or("");
                if let Some(group) = after.strip_prefix("::{").or_else(|| after.strip_prefix('{')) {
                    let inner = group.split('}').next().unwrap_or("");
                    for item in inner.split(',') {
                        let item = item.trim().split(' ').next().unwrap_or("");
                        let full = match (path.is_empty(), item) {
                            (_, "") => continue,
                            (true, i) => i.to_string(),
                            (false, "self") => path.clone(),
                            (false, i) => format!("{path}::{i}"),
                        };
                        out.insert(join(&full));
                    }
                } else if !path.is_empty() {
                    out.insert(join(&path));
                }
            }
        }
    }
    out
}

/// Module-level dependency graph: file module -> file modules it names.
fn graph(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    let resolve = |path: &str| -> Option<String> {
        let mut parts: Vec<&str> = path.split("::").collect();
        while !parts.is_empty() {
            let candidate = parts.join("::");
            if modules.contains(candidate.as_str()) {
                return Some(candidate);
            }
            parts.pop();
        }
        None
    };
    let mut g = BTreeMap::new();
    for s in sources {
        let deps: BTreeSet<String> = references(s)
            .iter()
            .filter_map(|r| resolve(r))
            .filter(|d| *d != s.module && !d.is_empty())
            // A folder's mod.rs only declares its children.
            .filter(|d| !(s.rel.ends_with("mod.rs") && d.starts_with(&s.module)))
            .collect();
        g.insert(s.module.clone(), deps);
    }
    g
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|x| x == d).unwrap_or(0);
                    let mut cycle = stack.get(start..).unwrap_or(&[]).to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(d, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys().filter(|n| !n.is_empty()) {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, g, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `line` holds `pat` not preceded by an identifier character when `pat` starts with
/// one (so `as *` does not match in `has *`, nor `addr_of` in `my_addr_of`).
fn has_token(line: &str, pat: &str) -> bool {
    let word_start = pat.starts_with(is_ident);
    line.match_indices(pat).any(|(i, _)| !word_start || !line.get(..i).unwrap_or("").ends_with(is_ident))
}

/// Outside `src/ffi/`: no raw pointer type, null pointer, cast to a pointer, nor any other way
/// to take a raw pointer (`as_ptr()`, `addr_of!`, `into_raw`). With no raw pointer there is
/// nothing to cast to or from an integer either.
fn pointer_violations(s: &Source) -> Vec<String> {
    let mut v = Vec::new();
    for line in code_lines(&s.code) {
        if let Some(p) = RAW_POINTER.iter().find(|p| has_token(line, p)) {
            v.push(format!("{}: raw pointer outside src/ffi ({p:?}): {}", s.rel, line.trim()));
        }
    }
    v
}

/// Outside `src/ffi/`: no `as` cast to a handle type, nor of a handle to an integer. Neither
/// compiles while the handles are structs (a non-primitive cast); this catches them should one
/// become a pointer alias again: a cast of a name the enclosing `fn` binds to a handle type
/// (`name: RStr`), or of a handle accessor's result (`.ptr()`, `leak(..)`).
fn handle_violations(s: &Source) -> Vec<String> {
    let mut v = Vec::new();
    // Names bound to a handle type since the last `fn` line.
    let mut handle_names: BTreeSet<String> = BTreeSet::new();
    for line in code_lines(&s.code) {
        if line.split(|c: char| !is_ident(c)).any(|w| w == "fn") {
            handle_names.clear();
        }
        for h in HANDLES {
            for pat in [format!(": {h}"), format!(": &{h}")] {
                for (i, _) in line.match_indices(&pat) {
                    let after = line.get(i + pat.len()..).unwrap_or("");
                    if after.starts_with(is_ident) {
                        continue;
                    }
                    let before = line.get(..i).unwrap_or("");
                    let name: String = before.chars().rev().take_while(|c| is_ident(*c)).collect();
                    handle_names.insert(name.chars().rev().collect());
                }
            }
        }
        for (i, _) in line.match_indices(" as ") {
            let target: String =
                line.get(i + 4..).unwrap_or("").chars().take_while(|c| is_ident(*c)).collect();
            if HANDLES.contains(&target.as_str()) {
                v.push(format!("{}: cast to a handle ({target}): {}", s.rel, line.trim()));
                continue;
            }
            if !INTEGERS.contains(&target.as_str()) {
                continue;
            }
            // The operand: the path or call chain just before ` as `.
            let before = line.get(..i).unwrap_or("");
            let operand: String = before
                .chars()
                .rev()
                .take_while(|c| is_ident(*c) || matches!(c, '.' | ':' | '(' | ')' | '*' | '?'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let accessor = operand.ends_with("ptr()") || operand.contains("leak(");
            let last: String = operand.trim_start_matches('*').rsplit('.').next().unwrap_or("").to_string();
            if accessor || handle_names.contains(&last) {
                v.push(format!("{}: handle cast to an integer: {}", s.rel, line.trim()));
            }
        }
    }
    v
}

/// Each of [`HANDLES`] is a tuple struct in `src/ffi/` (a type alias nowhere) whose field is
/// private or `pub(in crate::ffi)`: then the compiler refuses any code outside `src/ffi/` that
/// makes one from a pointer or reads the pointer in it.
fn handle_declarations(sources: &[Source]) -> Vec<String> {
    let mut v = Vec::new();
    for h in HANDLES {
        let alias = format!("type {h} =");
        for s in sources.iter().filter(|s| code_lines(&s.code).any(|l| has_token(l, &alias))) {
            v.push(format!("{}: handle {h} is a type alias", s.rel));
        }
        let decl = format!("pub struct {h}(");
        let fields: Vec<&str> = sources
            .iter()
            .filter(|s| layer(&s.module) == "ffi")
            .flat_map(|s| code_lines(&s.code))
            .filter_map(|l| l.trim_start().strip_prefix(&decl))
            .collect();
        if fields.is_empty() {
            v.push(format!("handle {h}: no `{decl}` in src/ffi"));
        }
        for f in fields {
            if f.starts_with("pub") && !f.starts_with("pub(in crate::ffi)") {
                v.push(format!("handle {h}: field is visible outside src/ffi"));
            }
        }
    }
    v
}

fn has_unsafe_or_raw(code: &str) -> bool {
    code_lines(code).any(|l| {
        l.contains("RedisModule_")
            || l.contains("raw::")
            || l.contains("extern \"C\"")
            || l.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == "unsafe")
    })
}

/// Every rule, as a list of violations (empty when the layout holds).
fn violations(root: &Path) -> Vec<String> {
    let sources = sources_in(root);
    let g = graph(&sources);
    let mut v = Vec::new();
    let kinds = kinds(&sources);
    for s in &sources {
        let deps = g.get(&s.module).cloned().unwrap_or_default();
        let mine = kind_of(&s.module, &kinds);
        let shared_core = s.module.starts_with("logic::wait") || s.module.starts_with("module::wait");
        for d in &deps {
            match (mine, kind_of(d, &kinds)) {
                (Some(a), Some(b)) if a != b => v.push(format!("{}: kind {a} imports kind {b} ({d})", s.rel)),
                (None, Some(b)) if shared_core => {
                    v.push(format!("{}: the shared core imports kind {b} ({d})", s.rel))
                }
                _ => {}
            }
        }
        match layer(&s.module) {
            "logic" => {
                if code_lines(&s.code).any(|l| l.contains("redis_module")) {
                    v.push(format!("{}: logic/ imports redis_module", s.rel));
                }
                for d in deps.iter().filter(|d| layer(d) != "logic") {
                    v.push(format!("{}: logic/ imports {d}", s.rel));
                }
            }
            "registry" => {
                for d in deps.iter().filter(|d| layer(d) == "module") {
                    v.push(format!("{}: registry/ imports the glue ({d})", s.rel));
                }
            }
            _ => {}
        }
        let in_ffi = layer(&s.module) == "ffi";
        let listed = NOT_YET_IN_FFI.contains(&s.rel.as_str());
        let raw = has_unsafe_or_raw(&s.code);
        if !in_ffi && raw && !listed {
            v.push(format!("{}: unsafe / raw API outside src/ffi", s.rel));
        }
        if listed && !raw {
            v.push(format!("{}: no raw API left; remove it from NOT_YET_IN_FFI", s.rel));
        }
        if layer(&s.module) == "logic" && raw {
            v.push(format!("{}: logic/ holds unsafe or raw API", s.rel));
        }
        // Every server command the module runs goes through ffi/call.rs, which checks the reply
        // for NULL (a renamed command, a key of another slot) before anything touches it.
        if s.rel != "ffi/call.rs" && code_lines(&s.code).any(|l| l.contains("RedisModule_Call(")) {
            v.push(format!("{}: RM_Call outside ffi/call.rs", s.rel));
        }
        if !in_ffi {
            v.extend(pointer_violations(s));
            v.extend(handle_violations(s));
        }
    }
    v.extend(handle_declarations(&sources));
    if let Some(c) = find_cycle(&g) {
        v.push(format!("import cycle: {}", c.join(" -> ")));
    }
    v
}

#[test]
fn layout_holds() {
    let found = kinds(&sources_in(&src_dir()));
    assert!(found.contains("lock"), "the kind rules see no kinds: {found:?}");
    let v = violations(&src_dir());
    assert!(v.is_empty(), "layering rules broken:\n{}", v.join("\n"));
}

/// The checks can fail: copies of src/ with one violation injected each are caught.
#[test]
fn injected_violations_are_caught() {
    let cases: [(&str, &str, &str); 15] = [
        ("module/lock/commands.rs", "\nuse crate::module::zz::x;\n", "kind lock imports kind zz"),
        ("logic/lock/state.rs", "\nuse crate::logic::zz::x;\n", "kind lock imports kind zz"),
        ("module/wait/grants.rs", "\nuse crate::module::lock::waiting::Lock;\n", "the shared core imports kind lock"),
        // A cycle: stats (imported by wait::table) importing wait::table.
        ("registry/stats.rs", "\npub fn _x() { crate::module::wait::table::admit(b\"\", b\"\"); }\n", "import cycle"),
        ("logic/args.rs", "\nuse redis_module::raw;\n", "logic/ imports redis_module"),
        ("registry/config.rs", "\nuse crate::module::effects;\n", "registry/ imports the glue"),
        (
            "logic/wait/queue.rs",
            "\npub fn _y() { unsafe { std::hint::unreachable_unchecked() } }\n",
            "outside src/ffi",
        ),
        (
            "ffi/rm.rs",
            "\npub fn _z(c: Ctx) { rm!(RedisModule_Call(c, c\"GET\".as_ptr(), c\"\".as_ptr()) else null_mut()); }\n",
            "RM_Call outside ffi/call.rs",
        ),
        // Raw pointers and casts to and from them outside src/ffi.
        ("module/cluster.rs", "\npub fn _p() { let _p = 0usize as *mut u8; }\n", "raw pointer outside src/ffi"),
        ("lib.rs", "\nfn _n() -> RStr { std::ptr::null_mut() }\n", "raw pointer outside src/ffi"),
        ("module/effects.rs", "\nfn _a(b: &[u8]) -> usize { b.as_ptr() as usize }\n", "raw pointer outside src/ffi"),
        // Casts to and of handles.
        ("module/writes.rs", "\nfn _r(n: usize) -> RStr { n as RStr }\n", "cast to a handle (RStr)"),
        ("module/token.rs", "\nfn _c(ctx: Ctx) -> usize {\n    ctx as usize\n}\n", "handle cast to an integer"),
        ("module/acl.rs", "\nfn _s() -> u64 { name(Cmd::Get).ptr() as u64 }\n", "handle cast to an integer"),
        // A handle turned back into an alias.
        ("ffi/timers.rs", "\npub type TimerId = u64;\n", "handle TimerId is a type alias"),
    ];
    for (file, injected, expect) in cases {
        // Before the tests module, so the scan sees it.
        let v = violations_after(file, |text| match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => text.insert_str(i, injected),
            None => text.push_str(injected),
        });
        assert!(v.iter().any(|m| m.contains(expect)), "{file}: expected {expect:?}, got {v:?}");
    }
    // A handle whose field is readable outside src/ffi.
    let v = violations_after("ffi/rm.rs", |text| {
        *text = text.replace("pub struct Ctx(pub(in crate::ffi) ", "pub struct Ctx(pub ");
    });
    let expect = "handle Ctx: field is visible outside src/ffi";
    assert!(v.iter().any(|m| m.contains(expect)), "expected {expect:?}, got {v:?}");
}

/// The violations of a copy of src/ with `file` changed by `edit`.
fn violations_after(file: &str, edit: impl FnOnce(&mut String)) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&src_dir(), dir.path());
    // A second kind, for the kind rules.
    for layer in ["logic", "module"] {
        fs::create_dir_all(dir.path().join(layer).join("zz")).unwrap();
        fs::write(dir.path().join(layer).join("zz/mod.rs"), "//! A kind.\n").unwrap();
    }
    let target = dir.path().join(file);
    let mut text = fs::read_to_string(&target).unwrap();
    let before = text.clone();
    edit(&mut text);
    assert_ne!(text, before, "{file}: the edit changed nothing");
    fs::write(&target, text).unwrap();
    violations(dir.path())
}

fn copy_tree(from: &Path, to: &Path) {
    let mut files = Vec::new();
    walk(from, &mut files);
    for f in files {
        let rel = f.strip_prefix(from).unwrap();
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(&f, &dest).unwrap();
    }
}
