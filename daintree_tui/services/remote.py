"""Remote hosts: daintree on other machines, driven through its own CLI over one multiplexed OpenSSH connection.

No daemon and no wire protocol of our own: a remote operation is the remote `daintree ... --json` run by `ssh`,
over a master connection (`ControlMaster=auto`, `ControlPersist`) whose socket lives in a private 0700 directory,
so after the first call each one costs a local mux client and one round trip, not a new SSH handshake.

Trust: hosts come only from the user's own config (`~/.config/daintree/config.toml`), never from a repository's
`.daintree.toml` (a cloned repo must not make us connect anywhere). Every word of a remote command is quoted for
the remote POSIX shell, and an ssh target can never be read as an option (no leading `-`, and `--` before it).

What a host prints is data, never trusted in size or shape: an answer is read by `read_capped` (a byte cap, its
timeout, ssh killed past either), a stream line by line within MAX_LINE_BYTES, and JSON is typed by
services/host_answers.py before anything uses it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from daintree_tui.core.config import user_config_dir
from daintree_tui.core.errors import ConfigError, InputError, OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.sandbox import SSH_CONTROL_DIR_ENV, ssh_control_dir
from daintree_tui.core.store import atomic_write_text

SSH_CONFIG_ENV = "DAINTREE_SSH_CONFIG"
CONTROL_DIR_ENV = SSH_CONTROL_DIR_ENV
DEFAULT_MAX_SESSIONS = 3
DEFAULT_PERSIST = "10m"
SSH_FAILED = 255  # ssh's own exit code when it could not connect (or the connection broke)
HOST_KEYS = ("ssh", "repo", "max_sessions", "daintree", "ssh_config")
CLOCK_SKEW_LIMIT = 5.0
# What one answer of a host may take (services/host_answers.py types it): a JSON answer of daintree is far smaller
# (1,000 worktrees with their sessions are about 1.5 MB); past the cap ssh is killed and the answer refused.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_ERROR_BYTES = 256 * 1024  # what a host prints on stderr beside one answer
MAX_LINE_BYTES = 64 * 1024  # one line of a stream (events, a log followed), or one piece of a passthrough line
MAX_REASON = 300  # characters of a host's own words kept in an error message

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_CONTROL_RE = re.compile(r"[\x00-\x20\x7f]")


class HostUnreachable(OperationError):
    """ssh could not reach the host (or the connection broke): one line naming the host and ssh's reason."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"host {host} unreachable: {reason}")
        self.host = host
        self.reason = reason


# -- validation -------------------------------------------------------------------------------------------------


def validate_host_name(name: str) -> str:
    """A host name: letters, digits, `.`, `_`, `-`, starting with a letter or digit (it becomes a TOML key)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name.endswith("."):
        raise InputError(f"invalid host name {name!r}: use letters, digits, '.', '_' or '-' (max 63), "
                         "starting with a letter or digit")
    return name


def validate_target(target: str) -> str:
    """An ssh destination (`user@box`, `box`, an ~/.ssh/config alias, `ssh://user@box:2222`).

    A leading `-` would make ssh read it as an option (`-oProxyCommand=...` runs a local command), and
    whitespace or control characters have no place in a host name.
    """
    if not isinstance(target, str) or not target:
        raise InputError("ssh target must not be empty")
    if target.startswith("-"):
        raise InputError(f"invalid ssh target {target!r}: it must not start with '-'")
    if _CONTROL_RE.search(target):
        raise InputError(f"invalid ssh target {target!r}: no spaces or control characters")
    return target


def validate_remote_path(path: str, what: str) -> str:
    """A path on the remote host: absolute or under `~/`, without control characters."""
    if not isinstance(path, str) or not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise InputError(f"invalid {what} {path!r}: give an absolute path or one under ~/")
    if re.search(r"[\x00-\x1f\x7f]", path):
        raise InputError(f"invalid {what} {path!r}: no control characters")
    return path


def validate_program(program: str) -> str:
    """The remote daintree program: a bare command name found on the remote PATH, or a remote path."""
    if not isinstance(program, str) or not program or program.startswith("-") or re.search(r"[\x00-\x1f\x7f]",
                                                                                             program):
        raise InputError(f"invalid daintree program {program!r}")
    return program


# -- configuration ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostConfig:
    """One `[hosts.<name>]` table of the user's config."""

    name: str
    ssh: str
    repo: str
    max_sessions: int = DEFAULT_MAX_SESSIONS
    daintree: str = "daintree"
    ssh_config: str | None = None

    def __post_init__(self) -> None:
        validate_host_name(self.name)
        validate_target(self.ssh)
        validate_remote_path(self.repo, f"hosts.{self.name}.repo")
        validate_program(self.daintree)
        if isinstance(self.max_sessions, bool) or not isinstance(self.max_sessions, int) or self.max_sessions < 1:
            raise ConfigError(f"config: hosts.{self.name}.max_sessions must be a positive integer "
                              f"(got {self.max_sessions!r})")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "ssh": self.ssh, "repo": self.repo,
                                "max_sessions": self.max_sessions, "daintree": self.daintree}
        if self.ssh_config:
            data["ssh_config"] = self.ssh_config
        return data

    def table(self) -> dict[str, Any]:
        """The TOML table that stores it (defaults left out)."""
        data = {k: v for k, v in self.to_dict().items() if k != "name"}
        if self.daintree == "daintree":
            del data["daintree"]
        return data


def user_config_path() -> Path:
    return user_config_dir() / "config.toml"


def parse_hosts(raw: Any) -> dict[str, HostConfig]:
    """Validate the `hosts` table of the user's config; a bad entry is one error naming its key."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: hosts must be a table of [hosts.NAME] tables (got {raw!r})")
    hosts: dict[str, HostConfig] = {}
    for name, value in raw.items():
        key = f"hosts.{name}"
        if not isinstance(value, Mapping):
            raise ConfigError(f"config: {key} must be a table (got {value!r})")
        unknown = sorted(set(value) - set(HOST_KEYS))
        if unknown:
            raise ConfigError(f"config: unknown keys in {key}: {', '.join(unknown)} (known: {', '.join(HOST_KEYS)})")
        for required in ("ssh", "repo"):
            if not isinstance(value.get(required), str):
                raise ConfigError(f"config: {key}.{required} must be a string")
        ssh_config = value.get("ssh_config")
        if ssh_config is not None and (not isinstance(ssh_config, str) or not ssh_config):
            raise ConfigError(f"config: {key}.ssh_config must be a path")
        try:
            hosts[str(name)] = HostConfig(
                name=str(name), ssh=str(value["ssh"]), repo=str(value["repo"]),
                max_sessions=value.get("max_sessions", DEFAULT_MAX_SESSIONS),
                daintree=value.get("daintree", "daintree"), ssh_config=ssh_config)
        except InputError as exc:
            raise ConfigError(f"config: {key}: {exc}") from None
    return hosts


def _read_user_config(path: Path) -> Any:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None


def load_hosts(path: Path | None = None) -> dict[str, HostConfig]:
    """The hosts of the user's config (never of a repository's). Read with tomllib: every `--host` command
    starts here, and only writing needs tomlkit's round trip."""
    from daintree_tui.core.config import read_toml

    data = read_toml(path or user_config_path())
    return parse_hosts(data.get("hosts"))


def get_host(name: str, path: Path | None = None) -> HostConfig:
    validate_host_name(name)
    hosts = load_hosts(path)
    if name not in hosts:
        known = ", ".join(sorted(hosts)) or "none configured"
        raise InputError(f"unknown host {name!r} (known: {known}; add one with `daintree host add`)")
    return hosts[name]


def save_host(host: HostConfig, path: Path | None = None, replace: bool = False) -> Path:
    """Write `[hosts.<name>]` into the user's config, keeping everything else in the file as it was."""
    import tomlkit

    path = path or user_config_path()
    doc = _read_user_config(path)
    hosts = doc.get("hosts")
    if hosts is None:
        hosts = tomlkit.table(is_super_table=True)
        doc["hosts"] = hosts
    elif not isinstance(hosts, Mapping):
        raise ConfigError(f"config: hosts in {path} must be a table")
    if host.name in hosts and not replace:
        raise InputError(f"host {host.name!r} already exists in {path} (use --replace to change it)")
    table = tomlkit.table()
    for key, value in host.table().items():
        table[key] = value
    hosts[host.name] = table
    parse_hosts(doc.unwrap().get("hosts"))  # what we write must read back
    try:
        atomic_write_text(path, tomlkit.dumps(doc))
    except OSError as exc:
        raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def delete_host(name: str, path: Path | None = None) -> bool:
    """Remove `[hosts.<name>]` from the user's config; False when there was none."""
    import tomlkit

    validate_host_name(name)
    path = path or user_config_path()
    doc = _read_user_config(path)
    hosts = doc.get("hosts")
    if not isinstance(hosts, MutableMapping) or name not in hosts:
        return False
    del hosts[name]
    atomic_write_text(path, tomlkit.dumps(doc))
    return True


# -- the control directory ----------------------------------------------------------------------------------------


def control_dir() -> Path:
    """Where master sockets live: DAINTREE_SSH_CONTROL_DIR, else $XDG_RUNTIME_DIR/daintree-ssh, else
    /tmp/daintree-ssh-<uid>. Kept short: a unix socket path has a limit of about 104 bytes, and ssh adds a
    40-character hash (`%C`) plus a temporary suffix while it binds."""
    # The master sockets carry authenticated connections: anyone who reaches one runs commands on the host as us.
    return private_dir(ssh_control_dir(), "ssh sockets")  # the sandbox hides the same folder


# -- quoting --------------------------------------------------------------------------------------------------------


def remote_word(text: str) -> str:
    """`text` as one word for the remote POSIX shell; a leading `~/` still means the remote home."""
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        return '"$HOME"/' + shlex.quote(text[2:])
    return shlex.quote(text)


def remote_command(argv: Sequence[str]) -> str:
    """A remote command line: ssh hands the remote shell one string, so every argument is quoted."""
    return " ".join(shlex.quote(arg) for arg in argv)


# Bytes left as they are by `for_any_login_shell`: the same inside every shell's single quotes (fish reads a
# backslash there, tcsh `!` and a newline), sh's double quotes (`$`, backquote, `"`, backslash) and printf's format
# (backslash, `%`). Bytes of non-ASCII text (0x80 and up) are none of these in any shell, so they pass too: UTF-8 text
# costs one byte a byte, not four.
_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ,._+:@/=-()[]{};&|<>*?#~^")
# Linux takes one argument of at most 128 KiB (MAX_ARG_STRLEN), and sshd hands the whole line to the login shell
# as one argument: a longer line fails there (and in our own exec of ssh) with "Argument list too long".
MAX_REMOTE_LINE = 128 * 1024 - 1


def for_any_login_shell(command: str) -> str:
    """POSIX `command` wrapped so that whatever the remote login shell is, `sh` parses it.

    sshd runs the command string with the user's login shell, and fish or tcsh read POSIX quoting differently:
    in fish, `\\'` inside single quotes is a quote, so an argument ending in a backslash would end its quotes early
    and let the next argument run as code. The wrapper is `sh -c 'eval "$(printf "...")"'` whose only ASCII
    characters are letters, digits, punctuation no shell reads inside single quotes, and octal escapes (`\\ddd`);
    sh's printf turns them back into the command, byte for byte. Non-ASCII bytes pass as they are (UTF-8 text
    would otherwise grow fourfold and a 40 KB description would no longer fit in one command line), and text
    that is not UTF-8 (arguments read with surrogateescape) is sent as the bytes it was.

    Raises:
        InputError: the line would pass Linux's limit of one argument (MAX_REMOTE_LINE).
    """
    parts: list[bytes] = []
    previous_raw_high = False
    for i, byte in enumerate(command.encode("utf-8", "surrogateescape")):
        if byte >= 0x80 or (byte in _PLAIN and not (i == 0 and byte == ord("-"))):
            parts.append(bytes([byte]))
            previous_raw_high = byte >= 0x80
            continue
        # In a double-byte locale (GBK, Big5, Shift_JIS) a lead byte followed by a backslash is one character and would
        # swallow the escape: an empty "" between them changes nothing for sh and keeps them apart.
        parts.append(b'""\\%03o' % byte if previous_raw_high else b"\\%03o" % byte)
        previous_raw_high = False
    line = b"sh -c 'eval \"$(printf \"" + b"".join(parts) + b"\")\"'"
    if len(line) > MAX_REMOTE_LINE:
        raise InputError(f"command too long for a remote host: {len(line)} bytes once quoted, the limit of one "
                         f"command line is {MAX_REMOTE_LINE} (send less text)")
    return line.decode("utf-8", "surrogateescape")


# Runs a command and ends it when our side goes away: sshd closes the channel's stdin when the client or the
# connection dies, and without a terminal nothing else would tell a `--follow` that nobody reads it any more.
_WATCHDOG = (
    'exec 3<&0; "$@" 3<&- & child=$!; '
    '{ read -r _ <&3; kill "$child"; } >/dev/null 2>&1 & watcher=$!; '
    'exec 3<&-; wait "$child"; status=$?; kill "$watcher" 2>/dev/null; exit "$status"'
)


@contextlib.contextmanager
def _forward_sigterm(proc: subprocess.Popen[Any]) -> Iterator[list[int]]:
    """While we wait on ssh, a SIGTERM for us ends ssh too (its remote side then ends with the connection).
    The list it yields receives the signal's number when that happened."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.getsignal(signal.SIGTERM)

    def forward(signum: int, frame: Any) -> None:
        received.append(signum)
        with contextlib.suppress(OSError):
            proc.terminate()

    signal.signal(signal.SIGTERM, forward)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def host_words(text: str, limit: int = MAX_REASON) -> str:
    """A host's own words (an error line, ssh's reason) as our messages quote them: one line, its terminal controls
    shown escaped, cut to `limit` characters."""
    from daintree_tui.services.host_answers import clean_text

    return clean_text(" ".join(text.split()), limit)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def read_capped(proc: subprocess.Popen[bytes], host: str, what: str, *, input: str | None = None,
                timeout: float | None, limit: int = MAX_ANSWER_BYTES,
                error_limit: int = MAX_ERROR_BYTES) -> tuple[bytes, bytes]:
    """`proc`'s stdout and stderr, read to their end within the caps; `proc` has ended when it returns.

    The one place a host's answer is read: never `communicate()`, which holds whatever a host sends (600 MB gave a
    1.78 GB peak). Past `limit` bytes of stdout, `error_limit` of stderr or `timeout` seconds, `proc` (ssh, which
    closes the channel, so the far side's writer ends too) is killed and the answer refused in one line.

    Raises:
        OperationError: an output passed its cap.
        HostUnreachable: no full answer within `timeout`.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    selector = selectors.DefaultSelector()
    out, err = bytearray(), bytearray()
    caps: dict[int, tuple[bytearray, int, str]] = {}
    for pipe, buffer, cap, label in ((proc.stdout, out, limit, "output"),
                                     (proc.stderr, err, error_limit, "error output")):
        if pipe is not None:
            caps[pipe.fileno()] = (buffer, cap, label)
            selector.register(pipe.fileno(), selectors.EVENT_READ)
    pending = memoryview((input or "").encode("utf-8", "surrogateescape"))
    stdin_fd = -1
    if proc.stdin is not None:
        if pending:
            stdin_fd = proc.stdin.fileno()
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    try:
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise HostUnreachable(host, f"no answer within {timeout:g}s")
            for key, _ in selector.select(left):
                if key.fd == stdin_fd:
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fd)
                        if proc.stdin is not None:
                            proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer, cap, label = caps[key.fd]
                if len(buffer) + len(chunk) > cap:
                    raise OperationError(f"host {host} answered more than {_size(cap)} of {label} to `{what}`: "
                                         "stopped reading there (no answer of daintree is that long)")
                buffer += chunk
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            raise HostUnreachable(host, f"no answer within {timeout:g}s") from None
    finally:
        selector.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    return bytes(out), bytes(err)


# -- results --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteResult:
    """What a remote command returned (ssh's own failures are raised as HostUnreachable instead)."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        import json

        return json.loads(self.stdout)


@dataclass
class HostCheck:
    """`host check`: what was found on the far side, and one line per problem."""

    name: str
    reachable: bool = False
    round_trip: float | None = None
    daintree: str | None = None
    tmux: str | None = None
    git: str | None = None
    repo: str | None = None
    clock_skew: float | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reachable": self.reachable, "round_trip": self.round_trip,
                "daintree": self.daintree, "tmux": self.tmux, "git": self.git, "repo": self.repo,
                "clock_skew": self.clock_skew, "problems": list(self.problems), "ok": not self.problems}


# -- the runner -----------------------------------------------------------------------------------------------------


class RemoteHost:
    """One configured host and the ssh commands that reach it over its master connection."""

    def __init__(self, config: HostConfig, *, persist: str = DEFAULT_PERSIST, connect_timeout: int = 10,
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
                 "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
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
        # `exec`, so the pid the watchdog kills is the command itself, not a shell that would leave it orphaned.
        return f"sh -c {shlex.quote(_WATCHDOG)} daintree-remote sh -c {shlex.quote('exec ' + command)}"

    def attach_argv(self, session: str, socket: str, conf: str | None = None) -> list[str]:
        """What an embedded terminal runs (in its own PTY) to show a remote session: `ssh -t host tmux -L socket
        -f conf attach-session -t =session`. `session` and `socket` come from the remote `session list --json`."""
        tmux = ["tmux", "-L", socket, *(["-f", conf] if conf else []), "attach-session", "-t", f"={session}"]
        return [*self.ssh_options(), "-o", "LogLevel=ERROR", "-t", "--", self.config.ssh,
                for_any_login_shell(remote_command(tmux))]

    # -- running -------------------------------------------------------------------------------------------------

    def _log_file(self) -> tuple[int, str]:
        # ssh's own messages go to this file (-E), so a remote command's stderr passes through untouched and a
        # connection failure can still be told apart and reported in one line.
        return tempfile.mkstemp(prefix="ssh-", suffix=".log", dir=self.controls)

    def _ssh_failure(self, code: int, log_path: str) -> str | None:
        """ssh's reason when `code` is ssh's own failure, else None (the remote command's 255)."""
        if code != SSH_FAILED:
            return None
        try:
            with open(log_path, "rb") as log:  # its tail only: a banner or a host's words may make it long
                log.seek(max(0, os.fstat(log.fileno()).st_size - MAX_ERROR_BYTES))
                text = log.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
        except OSError:
            return None
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not ln.startswith("Warning: Permanently added")]
        if not lines:
            return None
        reason = lines[-1]
        return host_words(reason[5:] if reason.startswith("ssh: ") else reason)

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
            reason = self._ssh_failure(proc.returncode, log_path)
        finally:
            with contextlib.suppress(OSError):
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
        pumps = [threading.Thread(target=_pump, args=(source_pipe, target, shown), daemon=True)
                 for source_pipe, target in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))
                 if source_pipe is not None and shown is not None]
        for pump in pumps:
            pump.start()
        with _forward_sigterm(proc) as received:
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
                    with contextlib.suppress(OSError):
                        proc.stdin.close()
        if received:
            with contextlib.suppress(OSError):
                os.unlink(log_path)
            return 128 + received[0]  # ended by a signal, as the shell reports it
        try:
            reason = self._ssh_failure(code, log_path)
        finally:
            with contextlib.suppress(OSError):
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
                    raise OperationError(f"host {self.name} sent a line longer than {_size(MAX_LINE_BYTES)} on "
                                         f"`daintree {' '.join(args[:2])}`: stopped reading there")
                yield raw.decode("utf-8", "replace").rstrip("\n")

        try:
            yield lines()
        finally:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
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
        from daintree_tui.services.host_answers import epoch, probe_lines

        report = HostCheck(self.name)
        daintree = remote_word(self.config.daintree)
        repo = remote_word(self.config.repo)
        script = "; ".join([
            "probe() { n=$1; shift; o=$(\"$@\" 2>&1 </dev/null); s=$?; "
            "printf '%s\\t%s\\t%s\\n' \"$n\" \"$s\" \"$(printf '%s' \"$o\" | head -n 1)\"; }",
            "probe time date +%s",
            f"probe daintree {daintree} --version",
            "probe tmux tmux -V",
            "probe git git --version",
            f"probe repo git -C {repo} rev-parse --show-toplevel",
        ])
        began = time.time()
        try:
            # Five lines of one line each: a host that prints more is refused (an OperationError, one line).
            result = self.run_command(f"sh -c {shlex.quote(script)}", timeout=self.connect_timeout + 30,
                                      limit=MAX_LINE_BYTES, what="host check")
        except HostUnreachable as exc:
            report.problems.append(str(exc))
            return report
        ended = time.time()
        report.reachable = True
        report.round_trip = round(ended - began, 3)
        probes = probe_lines(result.stdout)
        code, text = probes.get("time", (1, ""))
        now = epoch(text) if code == 0 else None
        if now is not None:
            skew = now - (began + ended) / 2
            report.clock_skew = round(skew, 1)
            if abs(skew) > CLOCK_SKEW_LIMIT + (ended - began) / 2:
                report.problems.append(f"host {self.name}: clock is {skew:+.0f}s off ours (sync it: NTP)")
        code, text = probes.get("daintree", (127, ""))
        if code == 0:
            report.daintree = text.split()[-1] if text.split() else text
            if report.daintree != local_version:
                report.problems.append(f"host {self.name}: daintree {report.daintree} there, {local_version} here: "
                                       "install the same version on both")
        else:
            report.problems.append(f"host {self.name}: daintree not runnable as {self.config.daintree!r} ({text}): "
                                   "install it there (pipx install daintree-tui) or set "
                                   f"hosts.{self.name}.daintree to its path")
        for tool in ("tmux", "git"):
            code, text = probes.get(tool, (127, ""))
            if code == 0:
                setattr(report, tool, text.strip())
            else:
                report.problems.append(f"host {self.name}: {tool} not found ({text})")
        code, text = probes.get("repo", (1, ""))
        if code == 0:
            report.repo = text.strip()
        else:
            report.problems.append(f"host {self.name}: {self.config.repo} is not a git repository there ({text})")
        return report


def _pump(source: IO[bytes], target: IO[str], shown: Callable[[str], str]) -> None:
    """Copy a host's output to our terminal line by line, each line as `shown` makes it; a line longer than
    MAX_LINE_BYTES goes in pieces of that size (each piece filtered alone: an escape cut in two is dropped, never
    completed), so no line of a host is held whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while raw := source.readline(MAX_LINE_BYTES):
        target.write(shown(decoder.decode(raw)))
        target.flush()
    target.write(shown(decoder.decode(b"", final=True)))
    target.flush()
    source.close()
