"""`host check`: one round trip that looks at everything daintree needs on the far side, and the report of it.

The probe is one `sh -c` script of five one-line probes (time, daintree, tmux, git, the repository); what the host
prints is typed and cut by host_answers.probe_lines before a word of it reaches a report.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from daintree_tui.services.host_answers import epoch, probe_lines
from daintree_tui.services.host_config import HostConfig
from daintree_tui.services.remote_shell import remote_word

CLOCK_SKEW_LIMIT = 5.0
IN_SYNC = 1.0  # seconds: a smaller offset is said as "in sync" (one round trip's noise is that large)


def clock_text(skew: float | None) -> str:
    """`host check`'s words for the clock: "in sync" under a second, else the offset to a tenth."""
    if skew is None:
        return "clock ?"
    return "clock in sync" if abs(skew) < IN_SYNC else f"clock {skew:+.1f}s off"


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


def probe_command(config: HostConfig) -> str:
    """The remote command of a check: each probe prints `name<TAB>exit code<TAB>first line of its output`."""
    daintree = remote_word(config.daintree)
    repo = remote_word(config.repo)
    script = "; ".join([
        "probe() { n=$1; shift; o=$(\"$@\" 2>&1 </dev/null); s=$?; "
        "printf '%s\\t%s\\t%s\\n' \"$n\" \"$s\" \"$(printf '%s' \"$o\" | head -n 1)\"; }",
        "probe time date +%s.%N",  # sub-second where date knows %N (GNU); whole seconds where it prints `N`
        f"probe daintree {daintree} --version",
        "probe tmux tmux -V",
        "probe git git --version",
        f"probe repo git -C {repo} rev-parse --show-toplevel",
    ])
    return f"sh -c {shlex.quote(script)}"


def read_probes(report: HostCheck, config: HostConfig, output: str, began: float, ended: float,
                local_version: str) -> HostCheck:
    """Fill `report` from what the probes printed between `began` and `ended` (wall clock, for the skew)."""
    name = config.name
    report.reachable = True
    report.round_trip = round(ended - began, 3)
    probes = probe_lines(output)
    code, text = probes.get("time", (1, ""))
    now = epoch(text) if code == 0 else None
    if now is not None:
        skew = now - (began + ended) / 2
        report.clock_skew = round(skew, 3)
        if abs(skew) > CLOCK_SKEW_LIMIT + (ended - began) / 2:
            report.problems.append(f"host {name}: clock is {skew:+.0f}s off ours (sync it: NTP)")
    code, text = probes.get("daintree", (127, ""))
    if code == 0:
        report.daintree = text.split()[-1] if text.split() else text
        if report.daintree != local_version:
            report.problems.append(f"host {name}: daintree {report.daintree} there, {local_version} here: "
                                   "install the same version on both")
    else:
        report.problems.append(f"host {name}: daintree not runnable as {config.daintree!r} ({text}): "
                               "install it there (pipx install daintree-tui) or set "
                               f"hosts.{name}.daintree to its path")
    for tool in ("tmux", "git"):
        code, text = probes.get(tool, (127, ""))
        if code == 0:
            setattr(report, tool, text.strip())
        else:
            report.problems.append(f"host {name}: {tool} not found ({text})")
    code, text = probes.get("repo", (1, ""))
    if code == 0:
        report.repo = text.strip()
    else:
        report.problems.append(f"host {name}: {config.repo} is not a git repository there ({text})")
    return report
