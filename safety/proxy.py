"""A small TCP proxy between the clients and every server (asyncio, in its own process).

Each (client, server) pair is a *link* with its own listening port, so one client can be cut
off while the others carry on. A cut does not drop anything: the proxy stops moving bytes for
the client (both directions, every server) and delivers what was held back when the cut heals,
which is what a long network delay or a healed partition does to a TCP stream. ``down`` makes
one server unreachable for one client (connections refused at once). ``retarget``
points a server's links at another port (failover, restart) and closes the open connections,
so the clients reconnect to the new server. ``drop`` blackholes a client's links (bytes in both
directions are read and thrown away: requests time out, as across a real partition that loses
packets) and ``reset`` then aborts its connections with a TCP RST (SO_LINGER 0). Replication can
run through the proxy too (a replica is a client of its master's link), so a partition can cut a
master off from its replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import socket
import struct
from typing import Any


class _Proxy:
    def __init__(self) -> None:
        self.upstream: dict[str, int] = {}
        self.open_client: dict[int, asyncio.Event] = {}
        self.conns: dict[str, set[tuple[int, asyncio.StreamWriter]]] = {}
        self.down: set[tuple[int, str]] = set()  # links that refuse connections (a node unreachable)
        self.dropping: set[int] = set()  # clients whose bytes are thrown away

    def gate(self, client: int) -> asyncio.Event:
        if client not in self.open_client:
            event = asyncio.Event()
            event.set()
            self.open_client[client] = event
        return self.open_client[client]

    async def link(self, client: int, server: str) -> int:
        self.conns.setdefault(server, set())

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self.serve(reader, writer, client, server)

        listener = await asyncio.start_server(handle, "127.0.0.1", 0)
        return int(listener.sockets[0].getsockname()[1])

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: int, server: str) -> None:
        gate = self.gate(client)
        await gate.wait()
        if (client, server) in self.down:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream[server])
        except OSError:
            writer.close()
            return
        live = self.conns[server]
        pair = {(client, writer), (client, up_writer)}
        live |= pair
        try:
            await asyncio.gather(self.pump(reader, up_writer, gate, client), self.pump(up_reader, writer, gate, client))
        finally:
            live -= pair
            for w in (writer, up_writer):
                w.close()

    async def pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: asyncio.Event, client: int
    ) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await gate.wait()  # a cut holds the bytes back until it heals
                if client in self.dropping:
                    continue  # a drop loses them
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def command(self, cmd: tuple[Any, ...]) -> Any:
        op = cmd[0]
        if op == "upstream":
            self.upstream[cmd[1]] = cmd[2]
            return None
        if op == "link":
            return await self.link(cmd[1], cmd[2])
        if op == "cut":
            self.gate(cmd[1]).clear()
            return None
        if op == "heal":
            self.gate(cmd[1]).set()
            return None
        if op == "drop":
            self.dropping.add(cmd[1])
            return None
        if op == "reset":
            self.dropping.discard(cmd[1])
            for server in self.conns.values():
                for c, w in list(server):
                    if c == cmd[1]:
                        sock = w.get_extra_info("socket")
                        if sock is not None:
                            with contextlib.suppress(OSError):
                                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        w.transport.abort()
            return None
        if op == "retarget":
            self.upstream[cmd[1]] = cmd[2]
            for _, w in list(self.conns.get(cmd[1], ())):
                w.close()
            return None
        if op == "down":
            self.down.add((cmd[1], cmd[2]))
            for c, w in list(self.conns.get(cmd[2], ())):
                if c == cmd[1]:
                    w.close()
            return None
        if op == "up":
            self.down.discard((cmd[1], cmd[2]))
            return None
        raise ValueError(op)


def _main(conn: multiprocessing.connection.Connection) -> None:
    async def run() -> None:
        proxy = _Proxy()
        loop = asyncio.get_running_loop()
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            if cmd[0] == "exit":
                conn.send(None)
                return
            try:
                conn.send(await proxy.command(cmd))
            except Exception as error:
                conn.send(error)

    asyncio.run(run())


class Proxy:
    """Handle on the proxy process; every call waits for the proxy's answer."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_main, args=(child,), daemon=True)
        self.proc.start()

    def call(self, *cmd: Any) -> Any:
        self._conn.send(cmd)
        if not self._conn.poll(10):
            raise RuntimeError(f"proxy did not answer {cmd!r}")
        reply = self._conn.recv()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def upstream(self, server: str, port: int) -> None:
        self.call("upstream", server, port)

    def link(self, client: int, server: str) -> int:
        return int(self.call("link", client, server))

    def cut(self, client: int) -> None:
        self.call("cut", client)

    def heal(self, client: int) -> None:
        self.call("heal", client)

    def drop(self, client: int) -> None:
        """Throw away every byte of the client's links (both directions) until ``reset``."""
        self.call("drop", client)

    def reset(self, client: int) -> None:
        """End a drop: abort the client's connections with a TCP RST (the streams lost bytes)."""
        self.call("reset", client)

    def down(self, client: int, server: str) -> None:
        """The client cannot reach the server: its connections are closed, new ones refused."""
        self.call("down", client, server)

    def up(self, client: int, server: str) -> None:
        self.call("up", client, server)

    def retarget(self, server: str, port: int) -> None:
        self.call("retarget", server, port)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("exit")
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
