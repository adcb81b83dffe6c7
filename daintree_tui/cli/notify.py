"""`daintree notify ...`: the repository's watcher (services/watcher.py: transitions, checkpoints, notices) and
the channels of the user's `[notify]`."""

from __future__ import annotations

import argparse
import signal
import socket
import threading
import time
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import emit
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.user_config import auto_checkpoints_or_on, load_notify_config
from daintree_tui.services import Services


def cmd_notify_watch(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.watcher import Watcher

    services.project.require_git()
    services.sessions.host  # noqa: B018 - a clear error without tmux
    if args.since is not None and args.since < 0:
        raise InputError("--since must be a byte offset of the event log (0 or more)")
    stop = threading.Event()
    # SIGTERM (`daintree notify stop`) and Ctrl-C end the loop between two looks, never inside one (a lock held).
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    if not Watcher(services, since=args.since).run(stop):
        emit(args, {"running": True, "started": False}, "a watcher already runs for this repository")
    return 0


def _status(services: Services) -> dict[str, Any]:
    from daintree_tui.services.watcher import log_path, watcher_pid

    config = load_notify_config()
    pid = watcher_pid(services.project)
    return {"running": pid is not None, "pid": pid if pid and pid > 0 else None, **config.to_dict(),
            "auto_checkpoints": auto_checkpoints_or_on(), "log": str(log_path(services.project))}


def cmd_notify_status(args: argparse.Namespace, services: Services) -> int:
    services.project.require_git()
    data = _status(services)

    def text() -> str:
        if data["running"]:
            watcher = f"watcher running (pid {data['pid']})"
            if not data["channels"]:
                watcher += ": recording transitions and checkpoints; no channel, so no notices"
        else:
            watcher = "no watcher running"
            if data["channels"] or data["auto_checkpoints"]:
                # Sessions started before then run unwatched until something starts the watcher.
                watcher += " (a session start or the dashboard starts one; `daintree notify watch &` starts one now)"
        channels = ", ".join(data["channels"]) or "none (set [notify] in your config)"
        checkpoints = ("at each end of an agent's turn" if data["auto_checkpoints"]
                       else "by hand only ([checkpoints] auto = false)")
        return (f"{watcher}\nchannels: {channels}\nkinds: {', '.join(data['kinds'])}\ncheckpoints: {checkpoints}\n"
                f"log: {data['log']}")

    emit(args, data, text)
    return 0


def cmd_notify_stop(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.watcher import stop_watcher

    services.project.require_git()
    pid = stop_watcher(services.project)
    emit(args, {"stopped": pid is not None, "pid": pid},
         f"stopped the watcher (pid {pid}); the next session start starts it again" if pid
         else "no watcher running")
    return 0


def cmd_notify_test(args: argparse.Namespace, services: Services) -> int:
    """One notice through every channel, now (quiet hours and kinds aside): what the user's config reaches."""
    from daintree_tui.services.notify import Notice, Notifier

    config = load_notify_config()
    if not config.channels:
        raise OperationError("no [notify] channel in your config (desktop, webhook, ntfy or command)")
    lines: list[str] = []
    notifier = Notifier(services.project, config, log=lines.append)
    notifier.send(Notice(kind="test", worktree=None, task=None, agent=None, status=None,
                         text="daintree: a test notification", ts=time.time(), host=socket.gethostname()),
                  force=True)
    notifier.close(timeout=30)
    failed = [line for line in lines if "not sent" in line or "Error" in line]
    emit(args, {"channels": config.channels, "log": lines, "ok": not failed}, "\n".join(lines))
    return 1 if failed else 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    notify = add(sub, "notify", None,
                 "the watcher (notices and checkpoints with no dashboard open) and your [notify] channels")
    nsub = notify.add_subparsers(dest="notify_command", metavar="ACTION", required=True)
    add(nsub, "status", cmd_notify_status,
        "whether the watcher runs, your config's channels and kinds, whether checkpoints are automatic")
    add(nsub, "stop", cmd_notify_stop, "stop the watcher (the next session start starts it again)")
    add(nsub, "test", cmd_notify_test, "send a test notice through every channel now")
    p = add(nsub, "watch", cmd_notify_watch,
            "record the sessions' transitions, send notices, until the last session ends (what a session start runs)")
    p.add_argument("--since", type=int, metavar="OFFSET", help=argparse.SUPPRESS)  # the event log's byte offset
