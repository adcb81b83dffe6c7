"""CLI for remote hosts: `daintree host add|list|check|remove`, and `--host NAME` on every other command.

`--host` is handled at one point before any command runs: the command line, minus `--host NAME`, is run by the
host's own daintree (in the host's repo) over its master connection; output, stderr and the exit code come back
unchanged. Only ssh's own failure is ours to word: `host X unreachable: <reason>`, exit 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import emit, one_line, table, write_line
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.services import Services

# Commands that only make sense here: the host registry itself, and whatever opens a UI on this machine.
LOCAL_ONLY = ("host", "demo", "mcp")


def strip_host_option(argv: Sequence[str]) -> list[str]:
    """`argv` without its `--host NAME` / `--host=NAME` words (everything after `--` is never looked at)."""
    out: list[str] = []
    skip = False
    for i, word in enumerate(argv):
        if word == "--":
            return [*out, *argv[i:]]
        if skip:
            skip = False
            continue
        if word == "--host":
            skip = True
            continue
        if word.startswith("--host="):
            continue
        out.append(word)
    return out


def run_on_host(args: argparse.Namespace, argv: Sequence[str], after: Sequence[str]) -> int:
    """Run this command line on `args.host`; returns the remote exit code."""
    from daintree_tui.services.remote import RemoteHost, get_host

    name = str(args.host)
    command = getattr(args, "command", None)
    if command is None:
        raise InputError("--host needs a command: the dashboard runs here (see `daintree host list`)")
    if command in LOCAL_ONLY:
        raise InputError(f"`daintree {command}` runs on this machine; --host does not apply to it")
    from daintree_tui.services.policy import in_session

    if in_session():
        # The host would see a plain ssh login, not this agent's role: from a session, --host would escape it.
        raise OperationError("--host is refused inside an agent's session (its role could not apply there)")
    if "repo" in args:
        raise InputError("--repo does not mix with --host: the host's repo is hosts.<name>.repo in your config")
    remote_args = strip_host_option(argv)
    options = remote_args[:remote_args.index("--")] if "--" in remote_args else remote_args
    if any(w == "--host" or w.startswith("--host=") for w in options):
        raise InputError("write --host NAME once, in full")
    if len(remote_args) == len(argv):
        raise InputError("write the option in full: --host NAME")
    if after:
        remote_args += ["--", *after]
    from daintree_tui.cli.output import replayable

    host = RemoteHost(get_host(name))
    return host.passthrough(remote_args, follow=bool(getattr(args, "follow", False)), shown=replayable)


def run_host_queue(args: argparse.Namespace, services: Services) -> int:
    """`queue run --hosts a,b`: place ready tasks on those hosts by free slots (see services/host_queue.py)."""
    import sys

    from daintree_tui.cli.common import ctrl_c_stops
    from daintree_tui.cli.orchestrate import WaitsTeller, labelled, stuck_text
    from daintree_tui.cli.output import error, wants_json
    from daintree_tui.services.host_queue import HostQueue, HostStepReport
    from daintree_tui.services.queue import QueueEvent
    from daintree_tui.services.remote import RemoteHost, get_host

    names = [n.strip() for n in str(args.hosts).split(",") if n.strip()]
    if not names or len(set(names)) != len(names):
        raise InputError(f"--hosts takes distinct host names separated by commas (got {args.hosts!r})")
    services.project.require_git()
    queue = HostQueue(services.project, [RemoteHost(get_host(n)) for n in names])
    # One line per placement, completion, failure and stop as it happens (a run of five tasks said nothing for
    # 55 s): on stdout, or on stderr with --json, whose stdout is the one summary document.
    said = sys.stderr if wants_json(args) else sys.stdout
    waits = WaitsTeller(said)

    def tell(event: QueueEvent) -> None:
        write_line(said, event.line())
        said.flush()

    away: set[str] = set()

    def report_errors(step: HostStepReport) -> None:
        for message in step.errors:
            error(message)
        waits(step.waiting_on)
        # A host that hangs or goes away, and its return, said as it happens: a run over a hung host printed
        # nothing for 40 s (each poll waits for its bound), then no word of the host at all.
        for name in step.unreachable:
            if name not in away:
                why = queue.feed.states[name].error or "no answer"
                write_line(said, f"unreachable: {name} ({one_line(why)}): nothing new goes there; its agents "
                           "keep running and its tasks stay as they are")
        for name in sorted(away - set(step.unreachable)):
            write_line(said, f"{name} answers again")
        away.clear()
        away.update(step.unreachable)
        said.flush()

    with ctrl_c_stops() as stop:
        report = queue.run(once=args.once, interval=args.interval, stop=stop, on_event=tell, on_step=report_errors)
    text = "; ".join([
        f"placed: {labelled([i for ids in report.placed.values() for i in ids], report.worktrees)}",
        f"completed: {labelled(report.completed, report.worktrees)}",
        *([f"failed: {labelled(report.failed, report.worktrees)}"] if report.failed else []),
        *([f"stopped: {labelled(report.stopped, report.worktrees)}"] if report.stopped else []),
        f"in flight: {report.in_flight}", f"free slots: {', '.join(f'{h} {n}' for h, n in report.free.items())}",
        f"ready or blocked: {report.waiting_tasks}"])
    text += "".join(f"\nunreachable: {h}" for h in report.unreachable)
    # The error names its host already when it is the host's answer ("host evil answered ..."): said once.
    text += "".join(f"\nerror: {e if e.startswith(f'host {h} ') else f'host {h}: {e}'}"
                    for h, e in report.host_errors.items())
    text += stuck_text(report.stuck)
    emit(args, report.to_dict(), text)
    if stop.is_set():
        error("interrupted")  # what the run did is above; what runs on the hosts keeps running there
        return 130
    return 1 if report.errors or report.host_errors else 0


# -- host commands ----------------------------------------------------------------------------------------------


def _refuse_inside_session(services: Services, action: str) -> None:
    """Hosts live in the user's own config (docs/design.md 2a trusts it, and the user's command line outside a session):
    an agent must not point daintree, and the sessions it places, at a machine of its choosing."""
    from daintree_tui.core.ownership import inside_session

    if inside_session(services.project):
        raise OperationError(f"daintree host {action} is refused from inside a session: only a person outside it may "
                             "change your hosts")


def cmd_host_add(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.remote import DEFAULT_MAX_SESSIONS, HostConfig, save_host

    _refuse_inside_session(services, "add")

    host = HostConfig(name=args.name, ssh=args.ssh, repo=args.remote_repo,
                      max_sessions=args.max_sessions if args.max_sessions is not None else DEFAULT_MAX_SESSIONS,
                      daintree=args.daintree or "daintree", ssh_config=args.ssh_config)
    path = save_host(host, replace=args.replace)
    emit(args, host.to_dict(), f"added host {host.name} ({host.ssh}, repo {host.repo}) to {path}\n"
                                f"check it: daintree host check {host.name}")
    return 0


def cmd_host_list(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.remote import load_hosts

    hosts = list(load_hosts().values())
    rows = [[h.name, h.ssh, h.repo, str(h.max_sessions), h.daintree] for h in hosts]
    emit(args, [h.to_dict() for h in hosts],
          table(rows, ["NAME", "SSH", "REPO", "MAX SESSIONS", "DAINTREE"]) or "no hosts (add one: daintree host add)")
    return 0


def cmd_host_check(args: argparse.Namespace, services: Services) -> int:
    """`host check NAME`, or every host of the config without a name (one report each, in name order)."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from daintree_tui import __version__
    from daintree_tui.services.host_check import clock_text
    from daintree_tui.services.remote import RemoteHost, get_host, load_hosts

    if args.name is not None:
        configs = [get_host(args.name)]
    else:
        configs = [config for _, config in sorted(load_hosts().items())]
        if not configs:
            raise InputError("no hosts to check (add one: daintree host add NAME --ssh TARGET --repo PATH)")
    with ThreadPoolExecutor(max_workers=min(8, len(configs))) as pool:  # a hung host does not hold the others
        reports = list(pool.map(lambda config: RemoteHost(config).check(__version__), configs))
    lines = []
    for report in reports:
        if report.problems and not getattr(args, "json", False):
            for problem in report.problems:  # they quote the host's own output: shown, never obeyed
                write_line(sys.stderr, one_line(f"problem: {problem}"))
        if not report.reachable:
            continue
        lines.append(f"host {report.name}: {len(report.problems)} problem(s)" if report.problems else
                     f"host {report.name}: reachable (round trip {report.round_trip}s), daintree "
                     f"{report.daintree or '-'}, {report.tmux or 'no tmux'}, {report.git or 'no git'}, repo "
                     f"{report.repo or '-'}, {clock_text(report.clock_skew)}")
    data: Any = reports[0].to_dict() if args.name is not None else [r.to_dict() for r in reports]
    emit(args, data, "\n".join(lines))
    return 1 if any(r.problems for r in reports) else 0


def cmd_host_remove(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.remote import delete_host

    _refuse_inside_session(services, "remove")
    removed = delete_host(args.name)
    emit(args, {"name": args.name, "removed": removed},
          f"removed host {args.name}" if removed else f"no host named {args.name} (nothing to do)")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    host = add(sub, "host", None, "remote hosts (your own config): agents on other machines over ssh")
    hsub = host.add_subparsers(dest="host_command", metavar="ACTION", required=True)
    # Not from `add`: its common options carry --repo (this repo), and here --repo is the repository there.
    about = "add a host to your config (~/.config/daintree/config.toml)"
    p = hsub.add_parser("add", help=about, description=about)
    p.set_defaults(handler=cmd_host_add)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
    p.add_argument("name", help="a name for the host, used with --host NAME")
    p.add_argument("--ssh", required=True, metavar="TARGET", help="user@box or an ~/.ssh/config alias")
    p.add_argument("--repo", dest="remote_repo", required=True, metavar="PATH", help="the repository there")
    p.add_argument("--max-sessions", type=int, metavar="N", help="agents the queue may run there at once")
    p.add_argument("--daintree", metavar="PROGRAM", help="the daintree program there (default: daintree)")
    p.add_argument("--ssh-config", metavar="FILE", help="an ssh config file to use instead of ~/.ssh/config")
    p.add_argument("--replace", action="store_true", help="replace a host of that name")
    add(hsub, "list", cmd_host_list, "list your hosts")
    p = add(hsub, "check", cmd_host_check, "reach a host (or every host); check daintree, tmux, git, the repo and "
            "the clock there")
    p.add_argument("name", nargs="?", help="the host's name (daintree host list); none: every host")
    p = add(hsub, "remove", cmd_host_remove, "remove a host from your config (nothing on the host changes)")
    p.add_argument("name", help="the host's name (daintree host list)")
