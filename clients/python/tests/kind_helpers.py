"""What the read-write lock's and the semaphore's tests share: Redisson's derived names, our Lua
registered so the module runs it natively (the path Redisson's own texts take), and the server of
each mode."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

import pytest
import redis
from conftest import lua_script
from servers import MODULE_PATH, Server


def prefixed(prefix: str, name: str) -> str:
    return f"{prefix}:{name}" if "{" in name else f"{prefix}:{{{name}}}"


def suffixed(name: str, suffix: str) -> str:
    return f"{name}:{suffix}" if "{" in name else f"{{{name}}}:{suffix}"


def register_native(server: Server, ops: Iterable[str]) -> bool:
    """`lock.redisson-scripts native` with our Lua's SHA1s registered under the operations
    `ops` (each file is named after its operation). False when the module does not know them."""
    bodies = {op: lua_script(op).encode() for op in ops}
    extra = ",".join(f"{op}:{hashlib.sha1(body).hexdigest()}:{len(body)}" for op, body in bodies.items())
    with server.client() as r:
        try:
            r.config_set("lock.redisson-extra-scripts", extra)
        except redis.ResponseError:
            return False
        r.config_set("lock.redisson-scripts", "native")
    return True


def pick_server(
    request: pytest.FixtureRequest, mode: str, has_kind: Callable[[Server], bool], kind: str, ops: Iterable[str]
) -> Server:
    """``module``: the LOCK.* commands of `kind` beside our Lua; ``native``: the same with our
    Lua of its operations `ops` run natively; ``lua``: a server without the module. Skipped when
    the module lacks the kind. Flushed."""
    if mode in ("module", "native"):
        if not MODULE_PATH.exists():
            pytest.skip(f"module not built: {MODULE_PATH}")
        server: Server = request.getfixturevalue("module_server" if mode == "module" else "native_server")
        if not has_kind(server):
            pytest.skip(f"the module has no {kind} commands")
        if mode == "native" and not register_native(server, ops):
            pytest.skip(f"the module does not run Redisson's {kind} scripts natively")
    else:
        server = request.getfixturevalue("plain_server")
    with server.client() as r:
        r.flushall()
        r.script_flush()
    return server
