"""A session with a network allow-list (or none) has a network namespace of its own, so no TCP or UDP leaves
it but through the proxy. A Unix socket is a connection the namespace does not cover: the filesystem stays
readable, and connect(2) works on a read-only mount (so does opening a FIFO for writing). /run is where the
machine's daemons keep theirs (a database, a resolver, a supervisor's control pipes)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.helpers.config import write_user_config

ATTACK = r"""
import os, socket, sys
path, fifo = sys.argv[1], sys.argv[2]
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    print("SOCKET", s.recv(100).decode())
except OSError as exc:
    print("SOCKET-REFUSED", exc.errno)
try:
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"d")
    print("FIFO-WRITTEN")
except OSError as exc:
    print("FIFO-REFUSED", exc.errno)
"""


@pytest.fixture
def daemon_in_run() -> Iterator[tuple[Path, Path, Callable[[], bytes]]]:
    """A daemon's socket and control FIFO in a folder of /run, as a database or a service supervisor keeps them."""
    folder = Path("/run") / f"daintree-adv-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError:
        if os.environ.get("CI"):
            raise
        pytest.skip("/run is not writable here (CI runs as root)")
    path, fifo = folder / "daemon.sock", folder / "control"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a supervisor holds its control pipe open
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)

    def heard() -> bytes:
        try:
            return os.read(reader, 100)
        except BlockingIOError:
            return b""

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with contextlib.suppress(OSError):
                conn.sendall(b"hello from the daemon outside")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield path, fifo, heard
    finally:
        os.close(reader)
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


# With the host's network too: a daemon that trusts its socket's peer (MySQL's root by unix_socket, a supervisor's
# control pipe, root-only) takes a root agent for root.
@pytest.mark.parametrize("network", ['["127.0.0.1:9"]', "false", "true"])
def test_no_unix_socket_or_fifo_in_run_is_a_way_out(repo: Path, sandbox_env: Path,
                                                    daemon_in_run: tuple[Path, Path, Callable[[], bytes]],
                                                    network: str) -> None:
    path, fifo, heard = daemon_in_run
    write_user_config(f"[sandbox]\nnetwork = {network}\n")
    cli = CLI(repo)
    cli.ok("worktree", "create", "leak")
    proc = cli("worktree", "run", "leak", "--", "python3", "-c", ATTACK, str(path), str(fifo))
    assert proc.returncode == 0, proc.stderr
    assert "SOCKET-REFUSED" in proc.stdout, f"a direct connection left the sandbox: {proc.stdout}"
    assert heard() == b"", f"the sandbox wrote a daemon's control pipe outside: {proc.stdout}"
    socket.socket(socket.AF_UNIX).connect(str(path))  # the daemon itself still answers outside
