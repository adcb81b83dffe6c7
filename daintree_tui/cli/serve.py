"""`daintree serve [--port P] [--bind ADDR]`: the dashboard in a browser, through textual-serve.

Every browser tab gets a dashboard of its own (`daintree --repo ROOT` run by textual-serve with its web driver), on
the same sessions as the terminal's. Everything is served under a random token, `http://ADDR:P/<token>/`: any
other path, the page and the websocket included, answers 403. The token is kept 0600 in daintree's secrets folder
(`serve-token`; delete it for a new one), which every sandbox hides: an agent shares the host's network by default
and reaches the port like any local process, so a token it could read (it was in the user's state dir, readable
inside) opened it a dashboard outside its sandbox. The address is 127.0.0.1 unless `--bind` says otherwise, and a
non-loopback address is refused unless the user's own config has `[serve] allow_remote = true` (the traffic is
plain HTTP: the token is as safe as the network it crosses; `ssh -L` is the better way from another machine).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import html
import ipaddress
import json
import os
import re
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import wants_json
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.spawn import python_module
from daintree_tui.services import Services

TOKEN_FILE = "serve-token"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,128}")
DEFAULT_PORT = 8000

_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="{static}css/xterm.css">
<script src="{static}js/textual.js"></script>
<style>
  html, body {{ margin: 0; height: 100%; background: #0c181f; }}
  .textual-terminal {{ width: 100vw; height: 100vh; }}
  .closed-dialog {{ display: none; position: absolute; inset: 0; align-items: center; justify-content: center;
                    color: #eee; font-family: monospace; font-size: 16px; }}
  body.-closed .closed-dialog {{ display: flex; }}
  body.-closed .textual-terminal {{ opacity: 0.3; }}
</style>
</head>
<body>
<div class="closed-dialog"><div>The dashboard ended. <a href="" style="color:#ac5af4">Open it again</a></div></div>
<div id="start"></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{websocket}" data-font-size="{font_size}">
</div>
</body>
</html>
"""


def token_path() -> Path:
    from daintree_tui.core.sandbox import secrets_dir

    return secrets_dir() / TOKEN_FILE


def _old_token_path() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("daintree", appauthor=False)) / TOKEN_FILE


def load_token() -> str:
    """The token of daintree's secrets folder, made (0600, in a 0700 folder) when missing; one that others could
    read, or not ours, is replaced. One left in the user's state dir by an earlier version is removed: every
    sandbox could read it."""
    import secrets

    from daintree_tui.core.fs_safe import private_dir
    from daintree_tui.core.store import atomic_write_text

    with suppressed(OSError):
        _old_token_path().unlink()
    path = token_path()
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            text = fh.read(256).decode("ascii", "replace").strip()
        if st.st_uid == os.getuid() and not st.st_mode & 0o077 and _TOKEN.fullmatch(text):
            return text
    except OSError:
        pass
    token = secrets.token_urlsafe(32)
    with suppressed(OSError):
        path.unlink()
    atomic_write_text(path, token + "\n")  # mkstemp: 0600 from the start
    os.chmod(path, 0o600)
    return token


def check_bind(bind: str) -> str:
    """The address to listen on: loopback always; another only when the user's config allows it."""
    from daintree_tui.core.user_config import serve_allows_remote

    if bind == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        raise InputError(f"--bind takes an IP address (got {bind!r}): 127.0.0.1, ::1, 0.0.0.0, ...") from None
    if not address.is_loopback and not serve_allows_remote():
        raise OperationError(f"--bind {bind} would serve your agents' terminals beyond this machine: refused unless "
                             "your own config (~/.config/daintree/config.toml) has [serve] allow_remote = true "
                             "(`ssh -L 8000:127.0.0.1:8000 HOST` reaches a loopback one safely)")
    return str(address)


def _server_class() -> type:
    """The textual-serve server, with every path under the token (imported only by `daintree serve`)."""
    from aiohttp import web
    from textual_serve.server import Server

    class TokenServer(Server):
        def __init__(self, command: str, host: str, port: int, token: str) -> None:
            super().__init__(command, host=host, port=port, title="daintree")
            self.token = token

        def _granted(self, request: web.Request) -> bool:
            first = request.path.lstrip("/").partition("/")[0]
            return hmac.compare_digest(first.encode(), self.token.encode())

        @web.middleware
        async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
            if not self._granted(request):
                return web.Response(status=403, text="403: the URL that `daintree serve` printed is needed\n")
            if request.path.endswith("/ws") and request.headers.get("Upgrade", "").lower() != "websocket":
                # textual-serve's handler answers a plain GET with a traceback on the serve terminal
                return web.Response(status=400, text="400: the dashboard's websocket: open the URL that "
                                    "`daintree serve` printed\n")
            origin = request.headers.get("Origin")
            if request.path.endswith("/ws") and origin and origin.split("://", 1)[-1] != request.host:
                return web.Response(status=403, text="403: another site's page may not open the dashboard\n")
            response = await handler(request)
            # The token is in the URL: no page of ours tells it to another site, nor may frame it.
            response.headers.setdefault("Referrer-Policy", "no-referrer")
            response.headers.setdefault("Cache-Control", "no-store")
            response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
            return response

        async def _make_app(self) -> web.Application:
            app = web.Application(middlewares=[self.guard])
            prefix = f"/{self.token}"

            async def to_slash(request: web.Request) -> web.StreamResponse:
                raise web.HTTPFound(f"{prefix}/")

            app.add_routes([
                web.get(prefix, to_slash),
                web.get(f"{prefix}/", self.handle_index),
                web.get(f"{prefix}/ws", self.handle_websocket),
                web.static(f"{prefix}/static", self.statics_path),
            ])
            return app

        async def handle_index(self, request: web.Request) -> web.Response:
            scheme = "wss" if request.secure else "ws"
            font = request.query.get("fontsize", "16")
            page = _PAGE.format(title="daintree", static=html.escape(f"/{self.token}/static/"),
                                websocket=html.escape(f"{scheme}://{request.host}/{self.token}/ws"),
                                font_size=int(font) if font.isdigit() and 6 <= int(font) <= 64 else 16)
            return web.Response(text=page, content_type="text/html")

    return TokenServer


async def _serve(server: Any, bind: str, port: int, ready: Any) -> None:
    from aiohttp import web

    runner = web.AppRunner(await server._make_app(), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, bind, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OperationError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    ready(runner.addresses[0][1])
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def cmd_serve(args: argparse.Namespace, services: Services) -> int:
    project = services.project
    project.require_git()
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be from 0 to 65535 (got {args.port})")
    bind = check_bind(args.bind)
    try:
        server_class = _server_class()
    except ImportError:
        raise OperationError("daintree serve needs textual-serve (pip install textual-serve)") from None
    token = load_token()
    command = shlex.join([*python_module("daintree_tui"), "--repo", str(project.root)])
    server = server_class(command, host=bind, port=args.port, token=token)

    def ready(port: int) -> None:
        shown = socket.gethostname() if ipaddress.ip_address(bind).is_unspecified else (
            f"[{bind}]" if ":" in bind else bind)
        url = f"http://{shown}:{port}/{token}/"
        if wants_json(args):
            sys.stdout.write(json.dumps({"url": url, "bind": bind, "port": port, "repo": str(project.root)}) + "\n")
        else:
            sys.stdout.write(f"serving the dashboard of {project.root} at\n  {url}\n(Ctrl-C stops it)\n")
        sys.stdout.flush()

    asyncio.run(_serve(server, bind, args.port, ready))
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "serve", cmd_serve, "the dashboard in a browser (textual-serve), behind a token in the URL")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="P",
                   help=f"the port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                   help="the address (default 127.0.0.1; another than loopback needs [serve] allow_remote = true "
                        "in your own config)")
