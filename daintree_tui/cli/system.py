"""`daintree doctor`, `trust`, `demo`, and the dashboard itself (no command)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from daintree_tui.cli import resume_collector
from daintree_tui.cli.common import AddCommand, build_services
from daintree_tui.cli.output import emit, wants_json
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.services import Services


def cmd_doctor(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.cli.sandbox import sandbox_status
    from daintree_tui.services import resume

    findings = services.reconcile(fix=args.fix)
    if services.project.is_git:
        findings += services.ops.stranded_tasks(fix=args.fix)  # tasks a dead queue or a stopped session left
    verb = "fixed" if args.fix else "found"
    sandbox = sandbox_status(services.project)
    # Sessions that vanished with their tmux server (a reboot): reported, and resumed when asked (`--resume`) or
    # when the config says so (`sessions.resume_after_restart`, with --fix).
    lost = resume.lost_sessions(services) if services.project.is_git else []
    wanted = args.resume or (args.fix and services.project.config.resume_after_restart)
    resumed = resume.resume(services, lost) if wanted and lost else []
    lines = [f"{verb}: {f}" for f in findings] or ["all consistent: tasks, index and git agree"]
    lines += [f"resumed: {r.lost.name} ({r.lost.agent}): {' '.join(r.command)}" if r.error is None
              else f"not resumed: {r.lost.name}: {r.error}" for r in resumed]
    lines += [f"found: {resume.describe(item)}" for item in lost if not resumed]
    emit(args, {"fixed": args.fix, "findings": findings, "sandbox": sandbox,
                "lost_sessions": [item.to_dict() for item in lost], "resumed": [r.to_dict() for r in resumed]},
         lambda: "\n".join(lines) + f"\nsandbox: {sandbox['reason']}"
         + f"\nlimits: {'' if sandbox['cgroups'] else 'cannot apply here: '}{sandbox['cgroups_reason']}")
    if any(r.error for r in resumed):
        return 1
    return 0 if args.fix or args.resume or not (findings or lost) else 1


def cmd_trust(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.ownership import inside_session
    from daintree_tui.core.trust import trust, trust_status

    if args.show:
        status = trust_status(services.project)
        commands = status["commands"] if isinstance(status["commands"], dict) else {}
        state = "trusted" if status["trusted"] else (
            "changed since you trusted it" if status["changed"] else "not trusted")
        lines = [f"{status['path']}: {state}", *(f"  {key} = {command!r}" for key, command in commands.items())]
        diff = status["diff"]
        if status["changed"]:
            # What changed is what is to be reviewed before trusting it again (the file's text: shown, not obeyed).
            lines += ["", "what changed since you trusted it:", *diff] if isinstance(diff, list) else [
                "", "no copy of the version you trusted was kept (it was trusted before copies were): review the "
                "whole file"]
        emit(args, status, "\n".join(lines))
        return 0
    if inside_session(services.project):  # docs/design.md 2a: trust comes from the user's own command line outside one
        raise OperationError("daintree trust is refused from inside a session: only a person outside it may let "
                             "the repository's commands run")
    record = trust(services.project)
    emit(args, record, f"trusted {record['path']} (sha256 {record['sha256'][:12]})")
    return 0


# `daintree --json` is a script that forgot its command: the dashboard would write its screen on the stdout read as
# JSON, and wait for keys that never come.
NO_JSON = "the dashboard has no --json: give a command (see daintree --help)"


def cmd_dashboard(args: argparse.Namespace, services: Services) -> int:
    if wants_json(args):
        raise InputError(NO_JSON)
    from daintree_tui.tui.app import run_dashboard

    resume_collector()  # Textual has loaded (see `cli.run`)
    return run_dashboard(build_services(services.project, pty_fallback=True))


def cmd_demo(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.project import Project
    from daintree_tui.demo import registry
    from daintree_tui.demo.repo import create_demo_repo

    if args.clean or args.no_ui:
        resume_collector()  # no dashboard to load first
    if args.clean:
        return _clean_demos(args)
    if wants_json(args) and not args.no_ui:
        raise InputError(NO_JSON)
    path = create_demo_repo(Path(args.path).expanduser() if args.path else None, start_agents=True)
    if args.no_ui:
        emit(args, {"path": str(path)}, str(path))
        if not wants_json(args):  # on stderr: stdout stays the path alone, for `cd "$(daintree demo --no-ui)"`
            print(f"its demo agents are running: `daintree --repo {path}` opens it, `daintree demo --clean` stops "
                  "them and deletes it", file=sys.stderr)
        return 0
    from daintree_tui.tui.app import run_dashboard

    resume_collector()
    try:
        with registry.showing(path):
            code = run_dashboard(build_services(Project.discover(path), pty_fallback=True), demo=True)
    finally:
        # The demo's agents are ours, not the user's: they end with the demo (its repository stays to look at).
        stopped = registry.stop_demo_sessions(path)
    print(f"stopped {len(stopped)} demo agent{'s' * (len(stopped) != 1)}; the demo repository stays at {path} "
          "(`daintree demo --clean` removes every demo)")
    return code


def _clean_demos(args: argparse.Namespace) -> int:
    from daintree_tui.demo.registry import clean_demos

    if args.path or args.no_ui:
        raise InputError("--clean takes no --path or --no-ui: it removes every demo repository daintree created")
    result = clean_demos()
    lines = [*(f"removed {p}" for p in result.removed),
             *(f"skipped {p}: a dashboard is showing it" for p in result.in_use),
             *(f"refused {p}: {why} (forgotten, not deleted)" for p, why in result.refused)]
    emit(args, result.to_dict(), lambda: "\n".join(lines) or "no demo repositories to remove")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "doctor", cmd_doctor, "reconcile tasks, index and git; report (or --fix) what disagrees")
    p.add_argument("--fix", action="store_true", help="repair what disagrees (the dashboard does this at start); "
                   "with sessions.resume_after_restart = true, also resume the sessions lost with their tmux server")
    p.add_argument("--resume", action="store_true",
                   help="start the sessions lost with their tmux server (a reboot) again, with their agents' resume")
    p = add(sub, "trust", cmd_trust, "allow the commands in this repo's .daintree.toml to run (for you only)")
    p.add_argument("--show", action="store_true", help="only say whether it is trusted, and list its commands")


def register_demo(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "demo", cmd_demo, "open the dashboard on a throwaway demo repository with demo agents")
    p.add_argument("--no-ui", action="store_true", help="prepare the demo and print its path")
    p.add_argument("--path", help="where to create it (default: a new temp dir)")
    p.add_argument("--clean", action="store_true",
                   help="stop the agents of every demo repository daintree created and delete them")
