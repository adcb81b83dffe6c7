"""The network allow-list's rules: `host` or `host:port` entries of `[sandbox] network`, parsed and matched.

Pure: the config reads them (a bad entry is a config error) and the proxy (`netproxy`) admits by them; they live
apart from the proxy so that reading a config never imports its server (asyncio).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from daintree_tui.core.log import suppressed


class AllowListError(ValueError):
    """An entry of `sandbox.network` that is not `host` or `host:port`."""


@dataclass(frozen=True)
class Rule:
    host: str  # lower case; an IP literal in its canonical form
    port: int | None  # None: any port

    def admits(self, host: str, port: int) -> bool:
        return self.host == host and (self.port is None or self.port == port)

    def __str__(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port is None else f"{shown}:{self.port}"


def canonical_host(host: str) -> str:
    host = host.strip().strip("[]").lower().rstrip(".")
    with suppressed(ValueError):
        return str(ipaddress.ip_address(host))
    return host


def valid_host(host: str) -> bool:
    """An IP literal or a DNS name of ASCII letters, digits and hyphens: nothing else is a host here. The name a
    request asks for is the agent's to choose, and it reaches the user's terminal (`worktree status`) and config
    (the allow hint): an escape sequence or a newline there would be the agent's words on the user's screen."""
    with suppressed(ValueError):
        ipaddress.ip_address(host)
        return True
    return 0 < len(host) <= 253 and all(
        0 < len(part) <= 63 and all(c.isascii() and (c.isalnum() or c == "-") for c in part)
        for part in host.split("."))


def parse_rule(entry: str) -> Rule:
    """`host`, `host:port`, `1.2.3.4:80`, `[::1]:8080` as a rule; AllowListError otherwise."""
    text = entry.strip()
    host, port = text, None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise AllowListError(f"sandbox.network: {entry!r} is not host[:port]")
        host, rest = text[1:close], text[close + 1:]
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                raise AllowListError(f"sandbox.network: {entry!r} is not host[:port]")
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, digits = text.partition(":")
        if not digits.isdigit():
            raise AllowListError(f"sandbox.network: {entry!r} is not host[:port]")
        port = int(digits)
    host = canonical_host(host)
    if not valid_host(host) or (port is not None and not 0 < port < 65536):
        raise AllowListError(f"sandbox.network: {entry!r} is not host[:port]")
    return Rule(host, port)


def parse_rules(entries: Sequence[str]) -> tuple[Rule, ...]:
    return tuple(dict.fromkeys(parse_rule(e) for e in entries))


def admitted(rules: Sequence[Rule], host: str, port: int) -> bool:
    host = canonical_host(host)
    return any(rule.admits(host, port) for rule in rules)
