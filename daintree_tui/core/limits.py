"""CPU, memory and process limits for one session, hook or `worktree run`, through the kernel's cgroups.

A command runs in a group of its own, made before it starts and removed once it has ended. Three backends, tried
in this order (the first that works here is the one used):
- `systemd`: `systemd-run --user --scope` where a user systemd answers; systemd makes and removes the scope.
- `cgroup2`: a delegated cgroup v2 subtree (`DAINTREE_CGROUP`, or the folder this process's own group sits in)
  whose `cgroup.subtree_control` offers the controllers.
- `cgroup1`: cgroup v1 as root (memory, pids and cpu hierarchies mounted under /sys/fs/cgroup), as in CI.

The command joins its group through a tiny `sh` prefix that writes its own pid into each `cgroup.procs` and then
execs the rest, so the group holds exactly the command and what it starts; the prefix runs outside the sandbox
(inside, /sys is read-only). Groups are named `<worktree>.<kind>.<nonce>` under one `daintree` folder, so a sweep
can find the empty ones a `kill -9` left behind (`sweep`, run by `doctor --fix` and at each new start).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.log import suppressed

CGROUP_ROOT = Path(os.environ.get("DAINTREE_CGROUP_ROOT", "/sys/fs/cgroup"))
GROUP_FOLDER = "daintree"
CGROUP_ENV = "DAINTREE_CGROUP"  # a delegated cgroup v2 folder to make groups in
_V1_CONTROLLERS = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# A group a kill -9 left is swept once it is empty and this old: a starting command joins within milliseconds.
_SWEEP_AGE_S = 30.0
# What `sh` runs before the command: join every group it is given, then become the command. Exit 125 (as `env`
# does for its own failures) when a group cannot be joined: a command must never run unlimited by surprise.
_JOIN = ('while [ "$1" != -- ]; do echo $$ > "$1" 2>/dev/null || { echo "daintree: cannot join the cgroup $1" >&2; '
         'exit 125; }; shift; done; shift; exec "$@"')


class LimitsError(ValueError):
    """A limit value that does not parse."""


def parse_size(value: object, key: str = "sandbox.memory") -> int:
    """`"4G"`, `"512M"`, `"1.5GiB"` or a number of bytes, as bytes (at least 1 MiB)."""
    if isinstance(value, bool):
        raise LimitsError(f'{key}: expected a size such as "4G", got {value!r}')
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value)):
        size = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    else:
        raise LimitsError(f'{key}: expected a size such as "4G", got {value!r}')
    if size < 1 << 20:
        raise LimitsError(f"{key}: {value!r} is under 1M; no program starts in that")
    return size


def format_size(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)


@dataclass(frozen=True)
class Limits:
    memory: int | None = None  # bytes
    pids: int | None = None
    cpu: float | None = None  # cores

    @property
    def any(self) -> bool:
        return self.memory is not None or self.pids is not None or self.cpu is not None

    def lowest(self, other: Limits) -> Limits:
        """Each limit the lower of the two (None is no limit)."""
        def low(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)
        memory, pids = low(self.memory, other.memory), low(self.pids, other.pids)
        return Limits(None if memory is None else int(memory), None if pids is None else int(pids),
                      low(self.cpu, other.cpu))

    def describe(self) -> list[str]:
        out = []
        if self.memory is not None:
            out.append(f"memory {format_size(self.memory)}")
        if self.pids is not None:
            out.append(f"pids {self.pids}")
        if self.cpu is not None:
            out.append(f"cpu {self.cpu:g} cores")
        return out

    def to_dict(self) -> dict[str, object]:
        return {"memory": None if self.memory is None else format_size(self.memory), "pids": self.pids,
                "cpu": self.cpu}


def parse_limits(table: dict[str, object], where: str) -> Limits:
    """`memory`, `pids` and `cpu` out of one `[sandbox]`-like table (other keys are not ours)."""
    memory = table.get("memory")
    pids = table.get("pids")
    cpu = table.get("cpu")
    if pids is not None and (isinstance(pids, bool) or not isinstance(pids, int) or pids < 1):
        raise LimitsError(f"{where}.pids: expected a whole number of processes >= 1, got {pids!r}")
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int | float) or not 0.01 <= cpu <= 4096):
        raise LimitsError(f"{where}.cpu: expected a number of cores such as 2.0 or 0.5, got {cpu!r}")
    return Limits(None if memory is None else parse_size(memory, f"{where}.memory"),
                  None if pids is None else int(pids), None if cpu is None else float(cpu))


@dataclass(frozen=True)
class Group:
    """One command's cgroup: its name and, per backend, the folders that hold it."""
    name: str
    backend: str
    folders: tuple[Path, ...] = ()  # cgroup1: one per controller; cgroup2: one

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "backend": self.backend, "folders": [str(f) for f in self.folders]}


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:  # cgroup files: one write(2) of the whole value
        handle.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


class Cgroup1:
    name = "cgroup1"

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root

    def available(self) -> tuple[bool, str]:
        missing = [c for c in _V1_CONTROLLERS if not (self.root / c / "cgroup.procs").is_file()]
        if missing:
            return False, f"cgroup v1: no {', '.join(missing)} hierarchy under {self.root}"
        if os.geteuid() != 0:
            return False, "cgroup v1: only root may make groups"
        return True, f"cgroup v1 ({', '.join(_V1_CONTROLLERS)}) as root"

    def create(self, name: str, limits: Limits) -> Group:
        folders = []
        try:
            for controller in _V1_CONTROLLERS:
                folder = self.root / controller / GROUP_FOLDER / name
                folder.mkdir(parents=True, exist_ok=False)
                folders.append(folder)
            memory, pids, cpu = folders
            if limits.memory is not None:
                _write(memory / "memory.limit_in_bytes", str(limits.memory))
                with suppressed(OSError):  # memsw exists only with swap accounting on
                    _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory))
            if limits.pids is not None:
                _write(pids / "pids.max", str(limits.pids))
            if limits.cpu is not None:
                _write(cpu / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
                _write(cpu / "cpu.cfs_quota_us", str(max(1000, int(limits.cpu * _CPU_PERIOD_US))))
        except OSError:
            for folder in folders:
                with suppressed(OSError):
                    folder.rmdir()
            raise
        return Group(name, self.name, tuple(folders))

    def procs_files(self, group: Group) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in group.folders]

    def reason(self, group: Group) -> str | None:
        memory, pids, _ = group.folders
        if _counter(_read(memory / "memory.oom_control"), "oom_kill") or _read(memory / "memory.failcnt").strip() \
                not in ("", "0"):
            return "oom-killed"
        if _counter(_read(pids / "pids.events"), "max"):
            return "pids limit"
        return None

    def groups(self) -> list[Group]:
        base = self.root / _V1_CONTROLLERS[0] / GROUP_FOLDER
        try:
            names = sorted(p.name for p in base.iterdir() if p.is_dir())
        except OSError:
            return []
        return [Group(n, self.name, tuple(self.root / c / GROUP_FOLDER / n for c in _V1_CONTROLLERS)) for n in names]


class Cgroup2:
    name = "cgroup2"

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root

    def parent(self) -> Path | None:
        if override := os.environ.get(CGROUP_ENV):
            return Path(override)
        if not (self.root / "cgroup.controllers").is_file():
            return None  # not a unified hierarchy at the usual place
        for line in _read(Path("/proc/self/cgroup")).splitlines():
            if line.startswith("0::"):
                return self.root / line[3:].lstrip("/") / GROUP_FOLDER
        return None

    def available(self) -> tuple[bool, str]:
        parent = self.parent()
        if parent is None:
            return False, "cgroup v2: no unified hierarchy"
        offered = set(_read(parent.parent / "cgroup.subtree_control").split()) if not parent.exists() else \
            set(_read(parent / "cgroup.controllers").split())
        lacking = [c for c in _V1_CONTROLLERS if c not in offered]
        if lacking:
            return False, f"cgroup v2: {parent.parent} does not delegate {', '.join(lacking)}"
        if not os.access(parent if parent.exists() else parent.parent, os.W_OK):
            return False, f"cgroup v2: {parent} is not ours to write"
        return True, f"cgroup v2 (delegated {parent})"

    def create(self, name: str, limits: Limits) -> Group:
        parent = self.parent()
        assert parent is not None
        if not parent.exists():
            parent.mkdir()
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in _V1_CONTROLLERS))
        folder = parent / name
        folder.mkdir()
        try:
            if limits.memory is not None:
                _write(folder / "memory.max", str(limits.memory))
                with suppressed(OSError):
                    _write(folder / "memory.swap.max", "0")
            if limits.pids is not None:
                _write(folder / "pids.max", str(limits.pids))
            if limits.cpu is not None:
                _write(folder / "cpu.max", f"{max(1000, int(limits.cpu * _CPU_PERIOD_US))} {_CPU_PERIOD_US}")
        except OSError:
            folder.rmdir()
            raise
        return Group(name, self.name, (folder,))

    def procs_files(self, group: Group) -> list[str]:
        return [str(group.folders[0] / "cgroup.procs")]

    def reason(self, group: Group) -> str | None:
        folder = group.folders[0]
        if _counter(_read(folder / "memory.events"), "oom_kill"):
            return "oom-killed"
        if _counter(_read(folder / "pids.events"), "max"):
            return "pids limit"
        return None

    def groups(self) -> list[Group]:
        parent = self.parent()
        if parent is None:
            return []
        try:
            return [Group(p.name, self.name, (p,)) for p in sorted(parent.iterdir()) if p.is_dir()]
        except OSError:
            return []


class SystemdScope:
    """`systemd-run --user --scope`: systemd makes the group, sets the limits and removes it at the end."""
    name = "systemd"

    def available(self) -> tuple[bool, str]:
        binary = shutil.which("systemd-run")
        if binary is None:
            return False, "systemd: no systemd-run"
        try:
            done = subprocess.run([binary, "--user", "--scope", "--quiet", "-p", "TasksMax=16", "true"],
                                  capture_output=True, timeout=5, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"systemd: {exc}"
        if done.returncode != 0:
            said = (done.stderr.decode(errors="replace").strip().splitlines() or ["no user manager"])[-1]
            return False, f"systemd: {said}"
        return True, "systemd user scope"

    def create(self, name: str, limits: Limits) -> Group:
        return Group(name, self.name)

    def prefix(self, group: Group, limits: Limits) -> list[str]:
        argv = ["systemd-run", "--user", "--scope", "--quiet", "--collect", f"--unit=daintree-{group.name}"]
        if limits.memory is not None:
            argv += ["-p", f"MemoryMax={limits.memory}", "-p", "MemorySwapMax=0"]
        if limits.pids is not None:
            argv += ["-p", f"TasksMax={limits.pids}"]
        if limits.cpu is not None:
            argv += ["-p", f"CPUQuota={round(limits.cpu * 100)}%"]
        return [*argv, "--"]

    def reason(self, group: Group) -> str | None:
        return None  # the scope is gone with its processes; systemd's journal holds the OOM kill

    def groups(self) -> list[Group]:
        return []


Backend = Cgroup1 | Cgroup2 | SystemdScope


def backends() -> list[Backend]:
    return [SystemdScope(), Cgroup2(), Cgroup1()]


_chosen: tuple[Backend | None, str] | None = None


def choose_backend(refresh: bool = False) -> tuple[Backend | None, str]:
    """The first backend that works here and why, or None and why none does (cached for the process)."""
    global _chosen
    if _chosen is None or refresh:
        reasons = []
        found: tuple[Backend | None, str] | None = None
        for backend in backends():
            ok, why = backend.available()
            if ok:
                found = (backend, why)
                break
            reasons.append(why)
        _chosen = found or (None, "; ".join(reasons))
    return _chosen


def group_name(worktree: str, kind: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", worktree)[:60]
    return f"{safe}.{kind}.{os.urandom(4).hex()}"


def prefix_for(backend: Backend, group: Group, limits: Limits) -> list[str]:
    """What goes before a command's argv so that it runs inside `group`."""
    if isinstance(backend, SystemdScope):
        return backend.prefix(group, limits)
    return ["sh", "-c", _JOIN, "daintree-limits", *backend.procs_files(group), "--"]


def _empty(group: Group) -> bool:
    return all(not _read(folder / "cgroup.procs").strip() for folder in group.folders)


def remove(backend: Backend, group: Group, wait_s: float = 0.0) -> str | None:
    """Remove an ended command's group (waiting up to `wait_s` for its last processes to go) and return why the
    kernel stopped it, if a limit did ("oom-killed", "pids limit"). A group still in use is left alone."""
    if not group.folders:
        return None
    deadline = time.monotonic() + wait_s
    while not _empty(group) and time.monotonic() < deadline:
        time.sleep(0.02)
    reason = backend.reason(group)
    if _empty(group):
        for folder in group.folders:
            with suppressed(OSError):
                folder.rmdir()
    return reason


def leftovers(backend: Backend | None = None, min_age_s: float = _SWEEP_AGE_S) -> list[Group]:
    """The empty groups older than `min_age_s`: what a killed command left (a starting one joins at once)."""
    backend = backend or choose_backend()[0]
    if backend is None:
        return []
    out = []
    now = time.time()
    for group in backend.groups():
        try:
            age = now - group.folders[0].stat().st_mtime
        except OSError:
            continue
        if age >= min_age_s and _empty(group):
            out.append(group)
    return out


def sweep(backend: Backend | None = None, min_age_s: float = _SWEEP_AGE_S) -> list[str]:
    """Remove the empty groups that a killed command left (older than `min_age_s`); the names removed."""
    backend = backend or choose_backend()[0]
    if backend is None:
        return []
    removed = []
    for group in leftovers(backend, min_age_s):
        remove(backend, group)
        if not group.folders[0].exists():
            removed.append(group.name)
    return removed


def find_group(backend: Backend, name: str) -> Group | None:
    return next((g for g in backend.groups() if g.name == name), None)


def reason_of(name: str) -> str | None:
    """Why the command of group `name` was stopped by a limit, while its group still exists."""
    backend = choose_backend()[0]
    group = find_group(backend, name) if backend is not None else None
    return backend.reason(group) if backend is not None and group is not None else None
