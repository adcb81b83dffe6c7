"""Inside a sandbox with an allow-list: 127.0.0.1:PORT forwarded to the proxy's Unix socket, then the command.

Run by path with the outside's Python (`python -I net_bridge.py PORT SOCKET -- argv...`): the standard library
alone, since inside the sandbox nothing of the project's environment is promised. The listening socket is bound
before the fork, so the command never races it; the forwarder is the child and the command keeps this process
(its pid, its terminal, its signals). When the command ends, bwrap ends the sandbox's pid namespace and the
forwarder with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof() if writer.can_write_eof() else writer.close()


async def _forward(listener: socket.socket, target: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: net_bridge.py PORT SOCKET -- COMMAND...", file=sys.stderr)
        return 2
    port, target, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        os.setsid()  # out of the terminal's process group: a Ctrl-C meant for the agent is not ours
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            asyncio.run(_forward(listener, target))
        finally:
            os._exit(0)
    listener.close()
    # Python ignores SIGPIPE and SIGXFSZ for itself, and an ignored signal stays ignored across exec: the agent's
    # `yes | head` said "Broken pipe" with an allow-list and not without one (sessions/launch.py does the same).
    for python_own in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(python_own, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"daintree: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
