"""Containment of one sandboxed command: its CPU, memory and process limits (a cgroup of its own) and its network
rule (none, all, or an allow-list served by a proxy outside), by config, and the argv layers that apply them.

What applies: for each key, the role's `[roles.Y.sandbox]` over the agent's `[agents.X.sandbox]` over the top
`[sandbox]` (as the mode). A repository's `.daintree.toml` is data until `daintree trust`: it may lower a limit
and tighten the network (false < an allow-list < true; a list only to a subset of the user's), and a raise is
ignored with a warning naming the key.

The layers around a sandboxed argv, outermost first:
`limits_run` (outside the group: reads why a limit stopped the command, removes the group) -> the cgroup join
prefix (`limits.prefix_for`) -> `netproxy` (the allow-list, on a Unix socket) -> bwrap (`--unshare-net`, the
socket bound at /run/daintree/proxy.sock) -> `net_bridge` (127.0.0.1:PORT inside, to the socket) -> argv.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import limits
from daintree_tui.core.allow_list import valid_host
from daintree_tui.core.config import Config
from daintree_tui.core.config_model import SandboxLevel
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import warn
from daintree_tui.core.mounts import PROXY_MOUNT
from daintree_tui.core.sandbox.spec import SandboxSpec
from daintree_tui.core.spawn import python_module
from daintree_tui.core.trust_record import is_trusted

BRIDGE_PORT = 3128  # inside the sandbox's own network namespace: no other process of the machine sees it
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
NO_PROXY_ENV = ("NO_PROXY", "no_proxy")
_LIMIT_KEYS = ("memory", "pids", "cpu")
_BRIDGE = Path(__file__).resolve().parents[1] / "net_bridge.py"
_warned: set[tuple[str, str]] = set()
# The host `sandbox check` asks for to see the proxy refuse it: its refusal is not shown as the agent's.
PROBE_DENIED_HOST = "denied.daintree.invalid"


@dataclass(frozen=True)
class Containment:
    """The limits and the network rule of one command."""

    limits: limits.Limits = field(default_factory=limits.Limits)
    network: bool = True  # False: no network at all
    allow: tuple[str, ...] | None = None  # the allow-list (a network through the proxy alone); None: no list

    def network_rule(self) -> str:
        if not self.network:
            return "none"
        if self.allow is None:
            return "all"
        return "only " + (", ".join(self.allow) or "(no host)")

    def to_dict(self) -> dict[str, object]:
        return {"limits": self.limits.to_dict(), "network": self.network_rule(),
                "allow": list(self.allow) if self.allow is not None else None}


def _warn_once(cfg: Config, text: str) -> None:
    key = (str(cfg.repo_config_path), text)  # once a repository: a process may serve more than one (the tests)
    if key not in _warned:
        _warned.add(key)
        warn(text)


def _resolve(levels: dict[str, SandboxLevel], agent: str | None, role: str | None) -> dict[str, tuple[Any, str]]:
    """Each key's value and the dotted key it came from, role over agent over top level."""
    names = [*([f"roles.{role}"] if role else []), *([f"agents.{agent}"] if agent else []), "sandbox"]
    out: dict[str, tuple[Any, str]] = {}
    for key in (*_LIMIT_KEYS, "network", "network_extra"):
        for name in names:
            level = levels.get(name)
            if level is None:
                continue
            value = getattr(level.limits, key) if key in _LIMIT_KEYS else getattr(level, key)
            if value is not None:
                out[key] = (value, f"sandbox.{key}" if name == "sandbox" else f"{name}.sandbox.{key}")
                break
    return out


def _network(values: dict[str, tuple[Any, str]], api_hosts: Sequence[str]) -> tuple[bool, tuple[str, ...] | None]:
    value = values.get("network", (True, ""))[0]
    extra = tuple(values.get("network_extra", ((), ""))[0])
    if value is True:
        return True, None
    if value is False:
        return False, None
    hosts = tuple(api_hosts) if value == "agent" else tuple(value)
    return True, tuple(dict.fromkeys((*hosts, *extra)))


def _rank(network: bool, allow: tuple[str, ...] | None) -> int:
    return 0 if not network else 1 if allow is not None else 2


def effective(cfg: Config, agent: str | None = None, role: str | None = None,
              api_hosts: Sequence[str] = ()) -> Containment:
    """The containment that applies to a command of `agent` (its preset's API hosts: `api_hosts`) in `role`."""
    merged = _resolve(cfg.sandbox_levels, agent, role)
    chosen = {k: merged.get(k, (None, ""))[0] for k in _LIMIT_KEYS}
    network, allow = _network(merged, api_hosts)
    untrusted = bool(cfg.sandbox_repo_keys) and not (cfg.repo_config_path is not None
                                                    and is_trusted(cfg.repo_config_path))
    if untrusted:
        own = _resolve(cfg.sandbox_user_levels, agent, role)
        for key in _LIMIT_KEYS:
            value, where = merged.get(key, (None, ""))
            mine = own.get(key, (None, ""))[0]
            if mine is not None and (value is None or value > mine):
                _warn_once(cfg, f"config: {where} in .daintree.toml ignored: a repository may only lower a limit "
                           "before it is trusted (run `daintree trust`)")
                chosen[key] = mine
        own_network, own_allow = _network(own, api_hosts)
        looser = _rank(network, allow) > _rank(own_network, own_allow) or (
            allow is not None and own_allow is not None and not set(allow) <= set(own_allow))
        if looser:
            where = merged.get("network_extra", merged.get("network", (None, "sandbox.network")))[1]
            _warn_once(cfg, f"config: {where or 'sandbox.network'} in .daintree.toml ignored: a repository may only "
                       "tighten the network before it is trusted (run `daintree trust`)")
            network, allow = own_network, own_allow
    if not cfg.sandbox_network:  # the user's `network = false` that an untrusted repository turned on (config)
        network, allow = False, None
    return Containment(limits.Limits(chosen["memory"], chosen["pids"], chosen["cpu"]), network, allow)


def proxy_socket_path() -> Path:
    """A fresh path for one command's proxy socket, in a 0700 folder of the user's; short (a Unix socket's path
    has at most 107 bytes), so under the runtime folder rather than a project's."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / "daintree-net" if runtime else Path("/tmp") / f"daintree-net-{os.getuid()}"
    return private_dir(folder, "the network proxies' sockets") / f"{os.urandom(6).hex()}.sock"


def proxy_env(env: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{BRIDGE_PORT}"
    for key in PROXY_ENV:
        env[key] = url
    env["NODE_USE_ENV_PROXY"] = "1"  # Node 24's own fetch honours the variables only with this
    for key in NO_PROXY_ENV:
        env.pop(key, None)  # an exception would be a direct connection, which the namespace cannot make anyway


@dataclass(frozen=True)
class Contained:
    """A contained command: its argv and what to keep of it (its group, for the record)."""

    argv: list[str]
    record: dict[str, object]
    group: limits.Group | None = None


def contain(wrap: Callable[[list[str], SandboxSpec], list[str]], argv: Sequence[str], spec: SandboxSpec,
            env: dict[str, str], containment: Containment, *, worktree: str, kind: str, mode: str,
            events: Path | None, reason_file: Path | None = None) -> Contained:
    """`argv` confined by `wrap` (a backend's) inside the limits and the network rule of `containment`.

    Sets the proxy variables in `env` with an allow-list (the environment is inherited, never on an argv).

    Raises:
        OperationError: limits are asked, no cgroup backend works here and the sandbox mode is `on`.
    """
    record: dict[str, object] = containment.to_dict()
    inner = list(argv)
    socket_path: Path | None = None
    if containment.allow is not None:
        socket_path = proxy_socket_path()
        spec = replace(spec, network=False, allow=containment.allow, proxy_socket=socket_path)
        inner = [sys.executable, "-I", str(_BRIDGE), str(BRIDGE_PORT), str(PROXY_MOUNT), "--", *inner]
        proxy_env(env)
    elif not containment.network:
        spec = replace(spec, network=False)
    spec = replace(spec, limits=containment.limits)
    out = wrap(inner, spec)
    # The proxy and the limits runner run outside the sandbox, started in the worktree (`python_module`).
    if socket_path is not None:
        proxy = [*python_module("daintree_tui.core.netproxy"), "--socket", str(socket_path),
                 "--worktree", worktree]
        for host in containment.allow or ():
            proxy += ["--allow", host]
        if events is not None:
            proxy += ["--events", str(events)]
        out = [*proxy, "--", *out]
    group = None
    if containment.limits.any:
        backend, why = limits.choose_backend()
        if backend is None:
            if mode == "on":
                raise OperationError(f"sandbox is on but its limits cannot work here: {why}")
            record["limits_note"] = f"limits not applied: {why}"
        else:
            limits.sweep(backend)  # what a kill -9 left behind
            try:
                group = backend.create(limits.group_name(worktree, kind), containment.limits)
            except OSError as exc:
                if mode == "on":
                    raise OperationError(f"sandbox is on but its cgroup cannot be made: {exc}") from None
                record["limits_note"] = f"limits not applied: {exc}"
            if group is not None:
                runner = [*python_module("daintree_tui.core.limits_run"), "--backend", backend.name,
                          "--group", group.name, "--kind", kind, "--worktree", worktree]
                for folder in group.folders:
                    runner += ["--folder", str(folder)]
                if reason_file is not None:
                    runner += ["--reason-file", str(reason_file)]
                if events is not None:
                    runner += ["--events", str(events)]
                out = [*runner, "--", *limits.prefix_for(backend, group, containment.limits), *out]
                record["group"] = group.name
                record["cgroup"] = backend.name
    return Contained(out, record, group)


_DENIED_SCAN = 5000  # events read from the log's tail for one worktree's denied hosts


def denied_hosts(records: Sequence[dict[str, Any]], worktree: str) -> list[str]:
    """The hosts the allow-list refused to worktree `worktree`'s commands (`sandbox.denied`), newest last, once
    each, as `host:port` (IPv6 in brackets)."""
    out: dict[str, None] = {}
    for record in records:
        if record.get("event") != "sandbox.denied":
            continue
        where = record.get("worktree")
        if not isinstance(where, dict) or where.get("name") != worktree:
            continue
        host, port = str(record.get("host", "")), record.get("port")
        if host == PROBE_DENIED_HOST or not valid_host(host):
            continue  # the proxy logs valid hosts only: anything else was not written by it
        shown = f"[{host}]" if ":" in host else host
        key = f"{shown}:{port}" if isinstance(port, int) else shown
        out.pop(key, None)
        out[key] = None
    return list(out)


def allow_hint(hosts: Sequence[str]) -> str:
    """The one line of the user's config.toml that admits `hosts` (a TOML array of strings)."""
    quoted = ", ".join('"' + h.replace("\\", "\\\\").replace('"', '\\"') + '"' for h in hosts)
    return f"[sandbox] network_extra = [{quoted}]"


def denied_of(events_log: Any, worktree: str) -> list[str]:
    """`denied_hosts` from an EventLog's tail."""
    records, _ = events_log.read(limit=_DENIED_SCAN)
    return denied_hosts(records, worktree)
