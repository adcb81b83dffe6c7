"""Remote hosts: daintree on other machines, driven through its own CLI over one multiplexed OpenSSH connection.

No daemon and no wire protocol of our own: a remote operation is the remote `daintree ... --json` run by `ssh`,
over a master connection (`ControlMaster=auto`, `ControlPersist`) whose socket lives in a private 0700 directory,
so after the first call each one costs a local mux client and one round trip, not a new SSH handshake.

The parts, one job each: the hosts of the user's config (services/host_config.py: never a repository's), the
quoting of every remote word (services/remote_shell.py), the ssh process and what a host prints, read within caps
(services/ssh_process.py), `host check` (services/host_check.py), and here the runner that puts them together.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import suppressed
from daintree_tui.core.sandbox import SSH_CONTROL_DIR_ENV, ssh_control_dir
from daintree_tui.services.host_check import HostCheck, probe_command, read_probes
from daintree_tui.services.host_config import (
    DEFAULT_MAX_SESSIONS,
    HostConfig,
    delete_host,
    get_host,
    load_hosts,
    save_host,
)
from daintree_tui.services.remote_shell import (
    MAX_REMOTE_LINE,
    for_any_login_shell,
    remote_command,
    remote_word,
    watched,
)
from daintree_tui.services.ssh_process import (
    MAX_ANSWER_BYTES,
    MAX_ERROR_BYTES,
    MAX_LINE_BYTES,
    HostUnreachable,
    forward_sigterm,
    host_words,
    pump_lines,
    read_capped,
    size_text,
)

# The face of remote hosts: the CLI, the dashboard's host feed, the bench and the tests import these from here.
__all__ = ["DEFAULT_MAX_SESSIONS", "MAX_LINE_BYTES", "MAX_REMOTE_LINE", "HostCheck", "HostConfig", "HostUnreachable",
           "RemoteHost", "RemoteResult", "control_dir", "delete_host", "for_any_login_shell", "get_host",
           "load_hosts", "remote_command", "save_host"]

SSH_CONFIG_ENV = "DAINTREE_SSH_CONFIG"
CONTROL_DIR_ENV = SSH_CONTROL_DIR_ENV
DEFAULT_PERSIST = "10m"
SSH_FAILED = 255  # ssh's own exit code when it could not connect (or the connection broke)
NO_ANSWER = "the connection ended before an answer came (ssh exit 255)"
# A host that hangs (its sshd stopped, a network that drops packets) holds a connection open and silent: each
# connection (the master's, so every call over it) asks the host every KEEPALIVE_INTERVAL seconds and gives up
# after KEEPALIVE_COUNT unanswered asks, so a hung host is told apart within about 4-6 s, not 30 s.
KEEPALIVE_INTERVAL = 2
KEEPALIVE_COUNT = 2
CONNECT_TIMEOUT = 5  # seconds for a new connection's TCP connect and SSH banner (a stopped sshd accepts, then hangs)


# -- the control directory ----------------------------------------------------------------------------------------


def control_dir() -> Path:
    """Where master sockets live: DAINTREE_SSH_CONTROL_DIR, else $XDG_RUNTIME_DIR/daintree-ssh, else
    /tmp/daintree-ssh-<uid>. Kept short: a unix socket path has a limit of about 104 bytes, and ssh adds a
    40-character hash (`%C`) plus a temporary suffix while it binds."""
    # The master sockets carry authenticated connections: anyone who reaches one runs commands on the host as us.
    return private_dir(ssh_control_dir(), "ssh sockets")  # the sandbox hides the same folder


# -- results --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteResult:
    """What a remote command returned (ssh's own failures are raised as HostUnreachable instead)."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


# -- the runner -----------------------------------------------------------------------------------------------------


class RemoteHost:
    """One configured host and the ssh commands that reach it over its master connection."""

    def __init__(self, config: HostConfig, *, persist: str = DEFAULT_PERSIST, connect_timeout: int = CONNECT_TIMEOUT,
                 controls: Path | None = None) -> None:
        self.config = config
        self.name = config.name
        self.persist = persist
        self.connect_timeout = connect_timeout
        self._controls = controls

    @property
    def controls(self) -> Path:
        if self._controls is None:
            self._controls = control_dir()
        return self._controls

    @property
    def ssh_config(self) -> str | None:
        return self.config.ssh_config or os.environ.get(SSH_CONFIG_ENV) or None

    # -- argv --------------------------------------------------------------------------------------------------

    def ssh_options(self, *, batch: bool = True) -> list[str]:
        """Options shared by every ssh call to this host (the master's and the clients')."""
        argv = ["ssh"]
        if self.ssh_config:
            argv += ["-F", str(Path(self.ssh_config).expanduser())]
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPersist={self.persist}",
                 "-o", f"ControlPath={self.controls}/%C",
                 "-o", f"ConnectTimeout={self.connect_timeout}",
                 "-o", f"ServerAliveInterval={KEEPALIVE_INTERVAL}",
                 "-o", f"ServerAliveCountMax={KEEPALIVE_COUNT}"]
        if batch:
            argv += ["-o", "BatchMode=yes"]  # never a password prompt where nobody can answer it
        return argv

    def command_argv(self, remote: str, *, tty: bool = False, batch: bool = True, no_stdin: bool = False) -> list[str]:
        """`ssh <options> -T|-t -- <target> <remote command string>`."""
        return [*self.ssh_options(batch=batch), "-t" if tty else "-T", *(["-n"] if no_stdin else []),
                "--", self.config.ssh, for_any_login_shell(remote)]

    def daintree_command(self, args: Sequence[str]) -> str:
        """The remote `daintree --repo <repo> ARGS...` as one shell string, every word quoted."""
        return " ".join([remote_word(self.config.daintree), "--repo", remote_word(self.config.repo),
                         *(shlex.quote(a) for a in args)])

    def watched(self, command: str) -> str:
        """`command` under the watchdog: it ends when our side of the connection goes away."""
        return watched(command)

    def attach_argv(self, session: str, socket: str, conf: str | None = None) -> list[str]:
        """What an embedded terminal runs (in its own PTY) to show a remote session: `ssh -t host tmux -L socket
        -f conf attach-session -t =session`. `session` and `socket` come from the remote `session list --json`."""
        # -u: the client takes UTF-8 whatever the host's locale (an ssh login there often has no LANG, and tmux then
        # drew each ✻ ✔ ● of an agent as `_`).
        tmux = ["tmux", "-u", "-L", socket, *(["-f", conf] if conf else []), "attach-session", "-t", f"={session}"]
        return [*self.ssh_options(), "-o", "LogLevel=ERROR", "-t", "--", self.config.ssh,
                for_any_login_shell(remote_command(tmux))]

    # -- running -------------------------------------------------------------------------------------------------

    def _log_file(self) -> tuple[int, str]:
        # ssh's own messages go to this file (-E), so a remote command's stderr passes through untouched and a
        # connection failure can still be told apart and reported in one line.
        return tempfile.mkstemp(prefix="ssh-", suffix=".log", dir=self.controls)

    def _ssh_failure(self, code: int, log_path: str, *, silent: str | None = None) -> str | None:
        """ssh's reason when `code` is ssh's own failure, else None (the remote command's 255). A 255 with no
        message of ssh's is `silent` (None: the remote command's own 255)."""
        if code != SSH_FAILED:
            return None
        try:
            with open(log_path, "rb") as log:  # its tail only: a banner or a host's words may make it long
                log.seek(max(0, os.fstat(log.fileno()).st_size - MAX_ERROR_BYTES))
                text = log.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
        except OSError:
            return silent
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not ln.startswith("Warning: Permanently added")]
        if not lines:
            return silent
        reason = host_words(lines[-1][5:] if lines[-1].startswith("ssh: ") else lines[-1])
        if "Host key verification failed" in reason:
            # With a config file of its own, a plain `ssh TARGET` reads ~/.ssh/config instead, where the alias
            # may not even resolve: the hint names the file.
            config = self.ssh_config
            given = f"-F {shlex.quote(str(Path(config).expanduser()))} " if config else ""
            reason += (f" (ssh does not know this host's key yet: connect once with `ssh {given}"
                       f"{shlex.quote(self.config.ssh)}` and accept it after checking its fingerprint, or add it "
                       "with `ssh-keyscan HOST >> ~/.ssh/known_hosts`; `StrictHostKeyChecking accept-new` in "
                       f"{config or '~/.ssh/config'} takes a new host's key on first contact)")
        return reason

    def run_command(self, remote: str, *, input: str | None = None, timeout: float | None = 60.0,
                    batch: bool = True, limit: int = MAX_ANSWER_BYTES, what: str | None = None) -> RemoteResult:
        """Run a remote shell command string, capturing its output within `limit` bytes and `timeout` seconds.

        Raises:
            HostUnreachable: ssh could not connect, or no full answer came within `timeout` (ssh is killed).
            OperationError: the host printed more than `limit` bytes (or MAX_ERROR_BYTES on stderr): ssh is killed,
                and what was read so far is dropped.
        """
        fd, log_path = self._log_file()
        os.close(fd)
        argv = self.command_argv(remote, batch=batch, no_stdin=input is None)
        argv[1:1] = ["-E", log_path]
        try:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except FileNotFoundError:
                raise OperationError("ssh is not installed (install the OpenSSH client)") from None
            stdout, stderr = read_capped(proc, self.name, what or "a command", input=input, timeout=timeout,
                                         limit=limit)
            # The commands run here are ours (daintree, `true`, the probe), none of which exits 255: a 255 with
            # no message is ssh's, as when the master connection it shared dies mid-command (a mux client
            # says so only at debug level), and no answer came.
            reason = self._ssh_failure(proc.returncode, log_path, silent=NO_ANSWER)
        finally:
            with suppressed(OSError):
                os.unlink(log_path)
        if reason is not None:
            raise HostUnreachable(self.name, reason)
        return RemoteResult(proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))

    def run(self, args: Sequence[str], *, input: str | None = None, timeout: float | None = 60.0) -> RemoteResult:
        """Run `daintree ARGS` on the host (in its repo) and capture the result."""
        return self.run_command(self.daintree_command(args), input=input, timeout=timeout)

    def run_json(self, args: Sequence[str], timeout: float | None = 60.0) -> Any:
        """`daintree ARGS --json` on the host, parsed; a failure is an OperationError with the remote's words."""
        cut = list(args).index("--") if "--" in args else len(args)  # after `--` it would be text, not an option
        what = f"daintree {' '.join(args[:min(cut, 2)])} --json"
        result = self.run_command(self.daintree_command([*args[:cut], "--json", *args[cut:]]), timeout=timeout,
                                  what=what)
        if result.exit_code != 0:
            error = OperationError if result.exit_code != 2 else InputError
            detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.exit_code}"
            raise error(f"host {self.name}: {host_words(detail)}")
        try:
            return result.json()
        except (ValueError, RecursionError):  # a host's `[[[[...` is a RecursionError: no JSON of ours either
            raise OperationError(f"host {self.name}: `{what}` did not print JSON "
                                 "(is the daintree there the same version? try `daintree host check`)") from None

    def passthrough(self, args: Sequence[str], *, follow: bool = False, stdin: IO[Any] | None = None,
                    shown: Callable[[str], str] | None = None) -> int:
        """Run `daintree ARGS` there with our stdout and stderr, returning its exit code unchanged.

        Args:
            follow: a streaming command (`--follow`): it runs under the watchdog, fed a pipe we hold open, so it
                ends when we do.
            stdin: what the remote command reads (default: ours, unless ours is a terminal).
            shown: what each line the host prints becomes on our stdout or stderr when that is a terminal (the
                host's words are data: an OSC 52 there would write the user's clipboard); None: as it came.
        """
        fd, log_path = self._log_file()
        os.close(fd)
        command = self.daintree_command(args)
        if follow:
            command = self.watched(command)
        source = stdin if stdin is not None else sys.stdin
        interactive = source is None or (hasattr(source, "isatty") and source.isatty())
        batch = not (sys.stderr.isatty() and interactive)
        argv = self.command_argv(command, batch=batch, no_stdin=interactive and not follow)
        argv[1:1] = ["-E", log_path]
        filtered = [stream for stream in (sys.stdout, sys.stderr) if shown is not None and stream.isatty()]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if follow else (None if interactive else source),
                                    stdout=subprocess.PIPE if sys.stdout in filtered else None,
                                    stderr=subprocess.PIPE if sys.stderr in filtered else None)
        except FileNotFoundError:
            raise OperationError("ssh is not installed (install the OpenSSH client)") from None
        pumps = [threading.Thread(target=pump_lines, args=(source_pipe, target, shown), daemon=True)
                 for source_pipe, target in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))
                 if source_pipe is not None and shown is not None]
        for pump in pumps:
            pump.start()
        with forward_sigterm(proc) as received:
            try:
                code = proc.wait()
                for pump in pumps:
                    pump.join()
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait()
                raise
            finally:
                if proc.stdin is not None:
                    with suppressed(OSError):
                        proc.stdin.close()
        if received:
            with suppressed(OSError):
                os.unlink(log_path)
            return 128 + received[0]  # ended by a signal, as the shell reports it
        try:
            reason = self._ssh_failure(code, log_path)
        finally:
            with suppressed(OSError):
                os.unlink(log_path)
        if reason is not None:
            raise HostUnreachable(self.name, reason)
        return code

    @contextlib.contextmanager
    def stream(self, args: Sequence[str]) -> Iterator[Iterator[str]]:
        """Lines of a streaming remote command (`worktree events --follow --json`), until the block ends.

        Leaving the block closes the pipe the watchdog reads, so the remote follower ends too.
        """
        command = self.watched(self.daintree_command(args))
        proc = subprocess.Popen(self.command_argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)

        def lines() -> Iterator[str]:
            assert proc.stdout is not None
            while True:
                raw = proc.stdout.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    return
                if len(raw) > MAX_LINE_BYTES:
                    raise OperationError(f"host {self.name} sent a line longer than {size_text(MAX_LINE_BYTES)} on "
                                         f"`daintree {' '.join(args[:2])}`: stopped reading there")
                yield raw.decode("utf-8", "replace").rstrip("\n")

        try:
            yield lines()
        finally:
            if proc.stdin is not None:
                with suppressed(OSError):
                    proc.stdin.close()
            if proc.stdout is not None:
                proc.stdout.close()  # a host still writing gets EPIPE, not a reader that never comes
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait()

    # -- the master connection -----------------------------------------------------------------------------------

    def _control(self, operation: str) -> subprocess.CompletedProcess[str]:
        argv = [*self.ssh_options(), "-O", operation, "--", self.config.ssh]
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)

    def master_running(self) -> bool:
        """Whether a master connection is up (asks it over its socket; no network traffic)."""
        return self._control("check").returncode == 0

    def start_master(self) -> float:
        """Open the master connection (or reuse it); returns the round trip of a `true` over it, in seconds."""
        began = time.perf_counter()
        result = self.run_command("true", timeout=self.connect_timeout + 20)
        if result.exit_code != 0:
            raise OperationError(f"host {self.name}: `true` failed there (exit {result.exit_code}): "
                                 f"{host_words(result.stderr)}")
        return time.perf_counter() - began

    def stop_master(self) -> bool:
        """Close the master connection (remote sessions live in the remote tmux and keep running)."""
        return self._control("exit").returncode == 0

    # -- checking ------------------------------------------------------------------------------------------------

    def check(self, local_version: str) -> HostCheck:
        """Reach the host once and look at everything daintree needs there (what it prints is typed and cut:
        see host_answers.probe_lines)."""
        report = HostCheck(self.name)
        began = time.time()
        try:
            # Five lines of one line each: a host that prints more is refused (an OperationError, one line).
            result = self.run_command(probe_command(self.config), timeout=self.connect_timeout + 30,
                                      limit=MAX_LINE_BYTES, what="host check")
        except HostUnreachable as exc:
            report.problems.append(str(exc))
            return report
        return read_probes(report, self.config, result.stdout, began, time.time(), local_version)
