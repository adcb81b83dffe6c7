"""A private sshd on 127.0.0.1 for the remote-host tests and benchmark: a throwaway host key and user key, its own
sshd_config and client ssh_config in a temp dir; no system or ~/.ssh config is read or written.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tests.conftest import wait_for

SSHD = Path("/usr/sbin/sshd")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sshd:
    """A private sshd on 127.0.0.1 (ours only: started, stopped and killed by pid)."""

    def __init__(self, base: Path, remote_home: Path, login_shell: str | None = None) -> None:
        """`login_shell`: the shell that reads each command line, as if it were the user's login shell (sshd's
        ForceCommand hands the line to it unchanged)."""
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "host_key")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "user_key")], check=True)
        shutil.copy(base / "user_key.pub", base / "authorized_keys")
        # The far side is a user of its own: HOME too, so the login shell reads no dotfile of this machine's
        # user (a ~/.bashrc that runs `pyenv rehash` takes a lock each session; one left by a killed session made
        # every later command wait 60 s, and CI's remote tests failed as hosts that never answer).
        remote_home.mkdir(parents=True, exist_ok=True)
        env = {"HOME": remote_home, "XDG_CONFIG_HOME": remote_home / "config", "XDG_DATA_HOME": remote_home / "data",
               "XDG_STATE_HOME": remote_home / "state",
               "GIT_AUTHOR_NAME": "Remote", "GIT_AUTHOR_EMAIL": "r@example.invalid", "GIT_COMMITTER_NAME": "Remote",
               "GIT_COMMITTER_EMAIL": "r@example.invalid"}
        (base / "sshd_config").write_text("\n".join([
            "ListenAddress 127.0.0.1", f"HostKey {base / 'host_key'}",
            f"AuthorizedKeysFile {base / 'authorized_keys'}", f"PidFile {base / 'sshd.pid'}",
            "StrictModes no", "UsePAM no", "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PubkeyAuthentication yes", "MaxSessions 64", "LogLevel ERROR",
            "SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()),
            *([f'ForceCommand {login_shell} -c "$SSH_ORIGINAL_COMMAND"'] if login_shell else []), "",
        ]))
        self.client_config = base / "ssh_config"
        self.client_config.write_text("\n".join([
            "Host dt-far dt-other", "  HostName 127.0.0.1", f"  Port {self.port}", f"  User {getpass.getuser()}",
            f"  IdentityFile {base / 'user_key'}", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {base / 'known_hosts'}", "  StrictHostKeyChecking accept-new",
            "  LogLevel ERROR", "",
        ]))

    def start(self) -> None:
        if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
            # sshd running as root insists on its (empty) privilege separation directory; a container without
            # an init system never made it.
            Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self.proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(self.base / "sshd_config"),
                                      "-p", str(self.port)], stdin=subprocess.DEVNULL,
                                     stderr=(self.base / "sshd.log").open("ab"))

        def listening() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"sshd exited: {(self.base / 'sshd.log').read_text()}")
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, timeout=20)

    def processes(self) -> list[int]:
        """Our sshd and its sshd children (one per connection): the pids a hung host stops. The far side's own
        programs (its tmux server, a daintree it runs) are not among them."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            pid, rest = int(text.split(" ", 1)[0]), text.rsplit(")", 1)
            names[pid] = text[text.index("(") + 1:text.rindex(")")]
            children.setdefault(int(rest[1].split()[1]), []).append(pid)
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            if pid == self.proc.pid or names.get(pid, "").startswith("sshd"):
                found.append(pid)
                todo += children.get(pid, [])
        return found

    def freeze(self) -> list[int]:
        """A hung host: SIGSTOP our sshd and its connections (open, and silent); `thaw` them after."""
        pids = self.processes()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def thaw(pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def kill(self) -> None:
        """Kill our sshd (its listener; connections already open live in their own children until they end)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def sshd_available() -> bool:
    """OpenSSH's server and client are installed (the remote tests and benchmark need both)."""
    return SSHD.exists() and all(shutil.which(tool) for tool in ("ssh", "ssh-keygen"))
