"""The kernel's own knobs, tested as a root agent would try them: real bubblewrap through `daintree worktree run`.

As root (CI), the sandbox's user namespace maps uid 0 to the host's 0 and the fresh /proc would leave every knob
that checks only the uid writable, for the whole machine. Each test runs a probe inside the real sandbox and looks
at what it could open for writing; no probe writes a byte to a knob, except the exploit's own `core_pattern`
write, whose old value the test puts back if it ever got through. Skipped only when not root (a normal user's
uid writes none of these anyway) or where bubblewrap cannot create a sandbox.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.sandbox import KERNEL_MASKED, KERNEL_READ_ONLY, BwrapSandbox
from tests.conftest import CLI

_OK, _WHY = BwrapSandbox().available()
pytestmark = [
    pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the knobs check the uid: only root could write them"),
]

# Opens each path for writing without writing anything (opening a sysctl or sysfs file has no effect) and reports
# the ones that opened, with the errno names of those that did not.
PROBE = r"""
import errno, json, os, stat, sys

def try_open(path, out):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        out["refused"][name] = out["refused"].get(name, 0) + 1
    else:
        os.close(fd)
        out["opened"].append(path)

def walk(top, out, dirs_too=False):
    if not os.path.lexists(top):
        out["missing"].append(top)
        return
    if not os.path.isdir(top) or os.path.islink(top):
        try_open(top, out)
        return
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode):
                try_open(path, out)
        if dirs_too:
            try:
                os.mkdir(os.path.join(root, "daintree-probe"))
            except OSError as exc:
                out["refused"]["mkdir:" + errno.errorcode.get(exc.errno, "?")] = 1
            else:
                out["opened"].append(os.path.join(root, "daintree-probe") + "/")
                os.rmdir(os.path.join(root, "daintree-probe"))

out = {"opened": [], "refused": {}, "missing": []}
for top in json.loads(sys.argv[1]):
    walk(top, out, dirs_too=top.startswith("/sys/fs/cgroup"))
print(json.dumps(out))
"""


@pytest.fixture
def sandboxed(repo: Path) -> Iterator[CLI]:
    """A repository with one worktree `k1`, whose `worktree run` is confined by the real sandbox."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "k1")
    yield cli


def _probe(cli: CLI, paths: list[str]) -> dict[str, Any]:
    proc = cli("worktree", "run", "k1", "--", sys.executable, "-c", PROBE, json.dumps(paths), timeout=240)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_core_pattern_cannot_run_an_agents_script_as_root_outside(sandboxed: CLI, repo: Path) -> None:
    """Issue 26 item 1, the exploit as written: the agent sets `kernel.core_pattern = |$PWD/esc.sh` and crashes
    a process; the kernel would run esc.sh as root in the host's namespaces (it wrote into the read-only primary).
    Now the write is EROFS, the host's core_pattern is what it was, and nothing ran."""
    knob = Path("/proc/sys/kernel/core_pattern")
    before = knob.read_text()
    marker = repo / "escaped-by-core-pattern"
    attack = (f'printf "#!/bin/sh\\ntouch {marker}\\n" > esc.sh && chmod +x esc.sh; '
              'echo "|$PWD/esc.sh" > /proc/sys/kernel/core_pattern; echo "write=$?"; '
              'ulimit -c unlimited; sh -c \'kill -SEGV $$\'; true')
    try:
        proc = sandboxed("worktree", "run", "k1", "--", "sh", "-c", attack, timeout=60)
        after = knob.read_text()
    finally:
        if knob.read_text() != before:  # a regression: the machine's crash handler is the agent's; put it back
            knob.write_text(before)
    assert "write=0" not in proc.stdout and "Read-only file system" in proc.stderr, (proc.stdout, proc.stderr)
    assert after == before
    assert not marker.exists()


def test_every_uid_only_knob_is_read_only_inside(sandboxed: CLI) -> None:
    """Every path of KERNEL_READ_ONLY (sysctls, sysrq-trigger, /proc/irq, /proc/bus, /proc/fs): each file below
    it refuses to open for writing inside, with EROFS (the mount) or EACCES (its mode) and nothing else. Then the
    whole of /proc/sys, walked inside: not one writable file (on main, as root: about 1,270 were)."""
    out = _probe(sandboxed, list(KERNEL_READ_ONLY))
    assert out["opened"] == [], out["opened"][:20]
    assert set(out["refused"]) <= {"EROFS", "EACCES"}, out["refused"]
    assert "/proc/sys" not in out["missing"]
    assert out["refused"].get("EROFS", 0) > 100  # the sysctls' own files were tried, not just their folders


def test_sys_is_read_only_all_the_way_down(sandboxed: CLI) -> None:
    """/sys is the host's, bound read-only recursively: cgroupfs (a new cgroup, a v1 release_agent: the classic
    container escape), /sys/kernel (uevent helper, profiling, rcu), securityfs and debugfs where mounted,
    /sys/power/state. Every file with a write bit refuses to open for writing, and no cgroup can be made."""
    tops = [p for p in ("/sys/fs/cgroup", "/sys/kernel", "/sys/power", "/sys/module", "/sys/block", "/sys/class")
            if Path(p).exists()]
    out = _probe(sandboxed, tops)
    assert out["opened"] == [], out["opened"][:20]
    assert set(out["refused"]) <= {"EROFS", "EACCES", "mkdir:EROFS"}, out["refused"]
    if Path("/sys/fs/cgroup").is_dir():
        assert out["refused"].get("mkdir:EROFS") == 1


def test_kernel_secrets_are_masked_and_dev_is_minimal(sandboxed: CLI) -> None:
    """KERNEL_MASKED (what the kernel reads out of itself for root: /proc/keys, /proc/timer_list, ACPI tables,
    /sys/firmware) shows nothing inside; /dev holds only bwrap's minimal devices, no disk, no memory, no kmsg."""
    present = [p for p in KERNEL_MASKED if Path(p).exists()]
    script = (
        "import json, os, sys\n"
        "seen = {}\n"
        "for p in json.loads(sys.argv[1]):\n"
        "    if os.path.isdir(p):\n"
        "        seen[p] = os.listdir(p)\n"
        "    else:\n"
        "        try:\n"
        "            seen[p] = open(p).read(64)\n"
        "        except OSError as exc:\n"
        "            seen[p] = exc.errno\n"
        "devs = sorted(n for n in os.listdir('/dev') if not os.path.islink('/dev/' + n)\n"
        "              and not os.path.isdir('/dev/' + n))\n"
        "print(json.dumps({'seen': seen, 'dev': devs}))\n"
    )
    proc = sandboxed("worktree", "run", "k1", "--", sys.executable, "-c", script, json.dumps(present))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for path, value in out["seen"].items():
        assert value in ([], "") or isinstance(value, int), (path, value)
    assert set(out["dev"]) <= {"null", "zero", "full", "random", "urandom", "tty", "console"}, out["dev"]


# What root may still open for writing in /proc inside, outside its own processes' folders, and why none is a knob
# of the machine: a PSI trigger (/proc/pressure/*) lives as long as the descriptor that set it and any user may
# set one. (/proc/mtrr has write bits but refuses the open without the host's CAP_SYS_ADMIN.)
PROC_WRITABLE_BY_DESIGN = frozenset({"/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory",
                                     "/proc/pressure/irq"})


def test_nothing_else_in_proc_opens_for_writing(sandboxed: CLI) -> None:
    """The search for "every other kernel knob that checks the uid only", kept as a test: every file of /proc
    inside, but for the processes' own folders (`/proc/<pid>`, `self`: the sandbox's pid namespace, nothing
    outside), is tried for writing. What opens is PROC_WRITABLE_BY_DESIGN at most; on main as root it was also
    every sysctl."""
    tops = [f"/proc/{name}" for name in sorted(os.listdir("/proc"))
            if not name.isdigit() and name not in ("self", "thread-self") and not os.path.islink(f"/proc/{name}")]
    out = _probe(sandboxed, tops)
    assert set(out["opened"]) <= PROC_WRITABLE_BY_DESIGN, sorted(set(out["opened"]) - PROC_WRITABLE_BY_DESIGN)[:20]
    assert set(out["refused"]) <= {"EROFS", "EACCES", "EPERM", "EINVAL", "ENOENT", "EIO", "ENXIO", "ENODEV"}, \
        out["refused"]
