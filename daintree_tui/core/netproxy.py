"""The network allow-list: a session's only way out, outside its sandbox.

With `[sandbox] network = ["host[:port]", ...]` a sandboxed command gets a network namespace of its own (bwrap
`--unshare-net`: a loopback and nothing else), so no direct connection leaves it. Its one way out is this proxy,
which runs outside the sandbox and listens on a Unix socket bound into it; inside, `net_bridge` forwards
127.0.0.1:PORT to that socket and the command finds it through `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY`.
The proxy admits `CONNECT host:port` and plain-HTTP requests (absolute URI) only to the listed hosts, by name or IP
literal; a refusal is a `sandbox.denied` event naming the worktree and the host, so the user can allow it (each
host:port once per command, MAX_LOGGED_DENIALS in all: the agent's refusals never flood the event log).

Why our own ~200 lines and not a proxy package: the well-kept ones (mitmproxy, proxy.py) listen on TCP ports that
every local process could use, bring TLS interception and plugins we must not run, and none both listens on a
Unix socket and reports refusals as our events. The proxy only parses one request head and then copies bytes; it
never reads TLS, so an allowed host's traffic is the agent's own end to end.

A name is resolved here, outside, by the proxy's own resolver: an agent cannot make a listed name mean another
address. The upstream connection is fixed to the host that was checked, so a second request on a kept-alive
connection reaches only that same host.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.allow_list import Rule, admitted, canonical_host, parse_rules, valid_host
from daintree_tui.core.event_log import EventLog
from daintree_tui.core.log import suppressed

_HEAD_LIMIT = 64 * 1024  # a request head longer than this is refused
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 15.0
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Refusals logged per command: each host:port once, and this many in all. The event log keeps one rotated file,
# and a refusal costs the agent a millisecond: 600 a second, every one an event, erased the outside's whole
# record (train results, transitions not yet notified) in minutes. One of each is all the allow hint needs.
MAX_LOGGED_DENIALS = 64


def _split_authority(authority: str, default_port: int) -> tuple[str, int] | None:
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return None
        host, rest = authority[1:close], authority[close + 1:]
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    if port_text and not port_text.isdigit():
        return None
    port = int(port_text) if port_text else default_port
    return (host, port) if valid_host(canonical_host(host)) and 0 < port < 65536 else None


@dataclass(frozen=True)
class Request:
    method: str
    host: str
    port: int
    head: bytes  # what to send upstream first (plain HTTP: the head in origin form; CONNECT: nothing)


def parse_head(head: bytes) -> Request | None:
    """The target of one proxy request head, or None when it is not a request we forward."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    method, target, version = parts
    if method == "CONNECT":
        found = _split_authority(target, 443)
        return None if found is None else Request(method, found[0], found[1], b"")
    scheme, sep, rest = target.partition("://")
    if not sep or scheme.lower() != "http":
        return None  # an origin-form request, or https:// without CONNECT: not a proxy request we forward
    authority, _, path = rest.partition("/")
    found = _split_authority(authority, _DEFAULT_PORTS["http"])
    if found is None:
        return None
    kept = [h for h in lines[1:] if h and not h.lower().startswith(("proxy-connection:", "proxy-authorization:"))]
    rebuilt = "\r\n".join([f"{method} /{path} {version}", *kept]) + "\r\n\r\n"
    return Request(method, found[0], found[1], rebuilt.encode("latin-1"))


class Proxy:
    def __init__(self, rules: Sequence[Rule], worktree: str, events: EventLog | None) -> None:
        self.rules = tuple(rules)
        self.worktree = worktree
        self.events = events
        self.denied: dict[str, None] = {}  # host:port, each once, at most MAX_LOGGED_DENIALS

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        request = parse_head(head[:-4])
        if request is None:
            await self._answer(writer, 400, "daintree: not a proxy request (CONNECT host:port or http://...)")
            return
        if not admitted(self.rules, request.host, request.port):
            self._deny(request.host, request.port)
            await self._answer(writer, 403, f"daintree: {request.host}:{request.port} is not on this worktree's "
                                            "network allow-list (sandbox.network)")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(canonical_host(request.host), request.port), _CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            await self._answer(writer, 502, f"daintree: cannot reach {request.host}:{request.port}: {exc}")
            return
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(request.head)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def _deny(self, host: str, port: int) -> None:
        shown = f"{canonical_host(host)}:{port}"
        if shown in self.denied or len(self.denied) >= MAX_LOGGED_DENIALS:
            return
        self.denied[shown] = None
        if self.events is not None:
            self.events.append("sandbox.denied", worktree={"name": self.worktree}, host=canonical_host(host),
                               port=port)

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, code: int, text: str) -> None:
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[code]
        body = (text + "\n").encode()
        writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        with suppressed(ConnectionError):
            await writer.drain()
        writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with suppressed(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()
            else:
                sink.close()


async def serve(socket_path: Path, proxy: Proxy) -> asyncio.Server:
    with suppressed(FileNotFoundError):
        socket_path.unlink()
    old = os.umask(0o177)  # the socket is the user's alone; the sandbox reaches it through its own bind
    try:
        return await asyncio.start_unix_server(proxy.handle, path=str(socket_path), limit=_HEAD_LIMIT)
    finally:
        os.umask(old)


async def _run(args: argparse.Namespace) -> int:
    """Serve the proxy, run the command beside it, and end with the command's own exit status."""
    proxy = Proxy(parse_rules(args.allow), args.worktree, EventLog(Path(args.events)) if args.events else None)
    socket_path = Path(args.socket)
    server = await serve(socket_path, proxy)
    child = await asyncio.create_subprocess_exec(*args.command)
    loop = asyncio.get_running_loop()

    def pass_on(sig: int) -> None:
        if child.returncode is None:
            child.send_signal(sig)

    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        # The terminal's hang-up reaches the command too (one process group); pass on what reaches only us.
        loop.add_signal_handler(sig, pass_on, sig)
    code = await child.wait()
    server.close()
    with suppressed(OSError):
        socket_path.unlink()
    return 128 - code if code < 0 else code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daintree-netproxy", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--allow", action="append", default=[])
    parser.add_argument("--worktree", default="")
    parser.add_argument("--events")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("a command to run after --")
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
