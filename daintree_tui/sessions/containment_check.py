"""`daintree sandbox check`, containment part: each limit and the network rule of a session, tried.

Limits: a process started in a real group with the session's limits (the same `limits_run` and join prefix a
session gets) reads back its own /proc/self/cgroup and each limit file of its group. Outside the sandbox, since
inside, the sandbox's own cgroup namespace shows its group as `/`. Network: a small program inside the session's
sandbox (the same wrap: the proxy, its bridge, the namespace) asks the proxy for an allowed host and for a denied
one, and tries a direct connection.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core import limits
from daintree_tui.core.errors import OperationError
from daintree_tui.core.sandbox.containment import BRIDGE_PORT, PROBE_DENIED_HOST, Containment
from daintree_tui.core.spawn import python_module

_TIMEOUT_S = 60

# Outside, in the group: where it is, and what each controller's limit file says.
LIMITS_PROBE = r"""
import json, os, sys
root = sys.argv[1]
out = {"cgroup": open("/proc/self/cgroup").read().splitlines(), "files": {}}
for line in out["cgroup"]:
    _, controllers, path = line.split(":", 2)
    for controller in controllers.split(","):  # "" on cgroup v2's line: the unified folder itself
        folder = os.path.join(root, controller, path.lstrip("/"))
        for name in ("memory.limit_in_bytes", "memory.max", "pids.max", "cpu.cfs_quota_us", "cpu.max"):
            try:
                out["files"][name] = open(os.path.join(folder, name)).read().strip()
            except OSError:
                pass
print(json.dumps(out))
"""

# Inside the sandbox: argv[1] the allowed host:port (or ""), argv[2] the denied one, argv[3] the bridge's port.
NETWORK_PROBE = r"""
import json, os, socket, sys
def through_proxy(target):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=20)
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        line = s.recv(200).split(b"\r\n")[0].decode(errors="replace")
        s.close()
        return line
    except OSError as exc:
        return "error " + str(exc)
def direct():
    try:
        socket.create_connection(("1.1.1.1", 443), timeout=3).close()
        return "connected"
    except OSError as exc:
        return "failed: " + (exc.strerror or str(exc))
print(json.dumps({"proxy_env": os.environ.get("HTTPS_PROXY"),
                  "allowed": through_proxy(sys.argv[1]) if sys.argv[1] else "",
                  "denied": through_proxy(sys.argv[2]), "direct": direct()}))
"""


@dataclass(frozen=True)
class ContainmentResult:
    what: str
    holds: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "holds": self.holds, "detail": self.detail}


def _expected(key: str, value: float) -> tuple[tuple[str, ...], str]:
    if key == "memory":
        return ("memory.limit_in_bytes", "memory.max"), str(int(value))
    if key == "pids":
        return ("pids.max",), str(int(value))
    return ("cpu.cfs_quota_us", "cpu.max"), str(max(1000, int(value * 100_000)))


def check_limits(containment: Containment, worktree: str, mode: str) -> list[ContainmentResult]:
    lim = containment.limits
    if not lim.any:
        return [ContainmentResult("limits", True, "none set (memory, pids, cpu)")]
    backend, why = limits.choose_backend()
    if backend is None:
        word = "refused: mode is on" if mode == "on" else "a session runs without them (mode auto)"
        return [ContainmentResult(f"limit {d}", mode != "on", f"cannot apply here: {why}; {word}")
                for d in lim.describe()]
    group = backend.create(limits.group_name(worktree, "check"), lim)
    argv = [*python_module("daintree_tui.core.limits_run"), "--backend", backend.name, "--group",
            group.name, "--kind", "check", *[a for f in group.folders for a in ("--folder", str(f))], "--",
            *limits.prefix_for(backend, group, lim), sys.executable, "-I", "-c", LIMITS_PROBE,
            str(limits.CGROUP_ROOT)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        limits.remove(backend, group, wait_s=2)
        return [ContainmentResult("limits", False, f"the probe did not run in its group: {exc}")]
    joined = any(group.name in line for line in seen.get("cgroup", []))
    out = []
    values = {"memory": lim.memory, "pids": lim.pids, "cpu": lim.cpu}
    for (key, value), shown in zip(((k, v) for k, v in values.items() if v is not None), lim.describe(),
                                   strict=True):
        names, want = _expected(key, value)
        found = next((seen["files"][n] for n in names if n in seen.get("files", {})), None)
        holds = joined and found is not None and found.split()[0] == want
        out.append(ContainmentResult(f"limit {shown}", holds,
                                     f"{backend.name}: {'in' if joined else 'NOT in'} {group.name}, "
                                     f"{'/'.join(names)} = {found}"))
    if backend.name == "systemd":  # the scope's files are systemd's; the join is what it proves
        out = [ContainmentResult(r.what, joined, r.detail) for r in out]
    return out


def check_network(containment: Containment, wrap: Any, env: dict[str, str], cwd: Path) -> list[ContainmentResult]:
    rule = containment.network_rule()
    if containment.allow is None:
        return [ContainmentResult("network", True, f"{rule} (no allow-list: nothing to try)")]
    allowed = next(iter(containment.allow), "")
    if allowed and allowed.rsplit(":", 1)[-1] == allowed.rsplit("]", 1)[-1]:
        allowed += ":443"  # a rule without a port admits any: try HTTPS's
    argv = wrap([sys.executable, "-I", "-c", NETWORK_PROBE, allowed, f"{PROBE_DENIED_HOST}:443",
                 str(BRIDGE_PORT)], env)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        raise OperationError(f"sandbox check could not try the network: {exc}") from None
    out = [ContainmentResult("network rule", True, rule),
           ContainmentResult("network: proxy set", bool(seen.get("proxy_env")), str(seen.get("proxy_env")))]
    if allowed:
        answer = str(seen.get("allowed"))
        # 200: through; 502: admitted, but the host did not answer (offline): the rule held either way.
        out.append(ContainmentResult(f"network: allowed {allowed}", " 403 " not in f" {answer} ", answer))
    denied = str(seen.get("denied"))
    out.append(ContainmentResult(f"network: refused {PROBE_DENIED_HOST}", " 403 " in f" {denied} ", denied))
    direct = str(seen.get("direct"))
    out.append(ContainmentResult("network: direct connection impossible", direct.startswith("failed"), direct))
    return out
