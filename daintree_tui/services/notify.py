"""Notices for a person away from the dashboard: what happened (from the event log) and where it goes.

A transition is recorded once (the observer's compare-and-set), as one event; a notice is made from that event,
so it is sent once however many dashboards and CLIs recorded or saw it, by the one process that delivers them
(the watcher, services/watcher.py). Kinds (docs/design.md 8):

| kind | from |
|---|---|
| `waiting` | `session.waiting`: the agent needs you |
| `done` | `session.exited` with code 0, or `task.completed` of a bound task (once per run of a session) |
| `failed` | `session.exited` with another code, or lost with its tmux server (reason `lost`) |
| `over_budget` | `session.over_budget` |
| `train` | `train.merged`, `train.conflict`, `train.failed` |

A session stopped on purpose (reason `stopped`) sends nothing. Channels come from the user's `[notify]` only
(core/user_config.py). Each channel delivers on a thread of its own, HTTP ones retried with back-off, so a receiver
that is down delays nothing else.
"""

from __future__ import annotations

import html
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core.config import in_quiet_hours
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.core.store import create_new
from daintree_tui.core.user_config import NotifyConfig
from daintree_tui.core.validate import escape_controls

SESSION_KINDS = ("waiting", "done", "failed", "over_budget")
HTTP_TIMEOUT = 5.0
RETRY_DELAYS = (1.0, 3.0, 9.0)  # after the first try: four tries in ~13 s, then the notice is given up (logged)
COMMAND_TIMEOUT = 30.0
WAITING_AFTER_TURN = 5.0  # seconds a session runs between two waits that are two notices (OncePerRun)
TERMINAL_NOTICE_TTL = 60.0  # a notice for a dashboard's terminal that no dashboard claimed by then is dropped


@dataclass(frozen=True)
class Notice:
    """One notification: the JSON object a webhook gets (`payload()`), and a line of text for the rest."""

    kind: str
    worktree: str | None
    task: dict[str, Any] | None
    agent: str | None
    status: str | None
    text: str
    ts: float
    host: str

    @property
    def title(self) -> str:
        what = {"waiting": "needs you", "done": "done", "failed": "failed", "over_budget": "over budget",
                "train": "merge train"}.get(self.kind, self.kind)
        return f"daintree: {self.worktree} {what}" if self.worktree else f"daintree: {what}"

    def payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "worktree": self.worktree, "task": self.task, "agent": self.agent,
                "status": self.status, "text": self.text, "ts": self.ts, "host": self.host}


def _task_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    task = record.get("task")
    if isinstance(task, dict) and isinstance(task.get("id"), int):
        return {"id": task["id"], "subject": str(task.get("subject", ""))}
    return None


def _text(value: Any) -> str:
    return escape_controls(str(value)) if value is not None else ""


def notice_for(record: Mapping[str, Any], host: str | None = None) -> Notice | None:
    """The notice an event record means, or None for events that notify nobody."""
    event = record.get("event")
    if not isinstance(event, str):
        return None
    worktree_field = record.get("worktree")
    worktree = worktree_field.get("name") if isinstance(worktree_field, dict) else None
    worktree = _text(worktree) if isinstance(worktree, str) and worktree else None
    agent = _text(record["agent"]) if isinstance(record.get("agent"), str) else None
    task = _task_of(record)
    ts = float(record["ts"]) if isinstance(record.get("ts"), int | float) else time.time()
    who = f"{worktree}: {agent}" if agent else f"{worktree}:"
    kind: str
    status: str | None
    if event == "session.waiting" and worktree:
        kind, status, text = "waiting", "waiting", f"{who} is waiting for you"
    elif event == "session.exited" and worktree:
        reason, code = record.get("reason"), record.get("exit_code")
        if reason == "stopped":
            return None
        status = "exited"
        if reason == "lost":
            kind, text = "failed", f"{who} was lost: its tmux server stopped"
        elif code == 0:
            kind, text = "done", f"{who} finished (exit 0)"
        else:
            kind, text = "failed", f"{who} exited ({code if isinstance(code, int) else 'no code'})"
            limit = record.get("limit")  # the cgroup limit that stopped it (sessions/session_records.py, at the exit)
            if limit in ("oom-killed", "pids limit"):
                text += f": {'oom-killed (its memory limit)' if limit == 'oom-killed' else 'its pids limit'}"
    elif event == "task.completed" and worktree and task:
        kind, status, text = "done", "completed", f"{worktree}: task {task['id']} completed: {_text(task['subject'])}"
    elif event == "session.over_budget" and worktree:
        budget = record.get("budget")
        scope = _text(budget.get("scope", "")).replace("_", " ") if isinstance(budget, dict) else ""
        kind, status, text = "over_budget", "over_budget", f"{who} is over its {scope or 'spend'} budget: stopped"
    elif event.startswith("train."):
        result = event.partition(".")[2]
        if result not in ("merged", "conflict", "failed"):
            return None
        why = record.get("reason") or record.get("error")
        files = record.get("files")
        detail = f": {_text(why)}" if why else (
            f": {', '.join(_text(f) for f in files[:5])}" if isinstance(files, list) and files else "")
        kind, status, text = "train", result, f"train: {worktree or '?'} {result}{detail}"
    else:
        return None
    if task is not None and kind != "train" and event != "task.completed":
        text += f" (task {task['id']}: {_text(task['subject'])})"
    return Notice(kind=kind, worktree=worktree, task=task, agent=agent, status=status, text=text, ts=ts,
                  host=host or socket.gethostname())


class OncePerRun:
    """`done` once per run of a session: an agent that completes its task and then exits 0 made two events. And
    `waiting` once per real wait: after a run's first, another only when the session was `running` for at least
    WAITING_AFTER_TURN seconds since (an agent that printed, paused, then drew its prompt sent two, a second apart)."""

    def __init__(self) -> None:
        self._done: set[str] = set()
        self._waited: set[str] = set()  # runs whose `waiting` was sent, and no turn since
        self._running_since: dict[str, float] = {}

    def accept(self, record: Mapping[str, Any], notice: Notice | None) -> bool:
        worktree_field = record.get("worktree")
        name = worktree_field.get("name") if isinstance(worktree_field, dict) else None
        event = record.get("event")
        ts = record.get("ts")
        if isinstance(name, str):
            if event == "session.started":
                self._done.discard(name)
                self._waited.discard(name)
                self._running_since.pop(name, None)
            elif event == "session.running" and isinstance(ts, int | float):
                self._running_since[name] = float(ts)
        if notice is None:
            return False
        if notice.kind == "waiting" and notice.worktree:
            since = self._running_since.pop(notice.worktree, None)
            if notice.worktree in self._waited and (since is None or notice.ts - since < WAITING_AFTER_TURN):
                return False
            self._waited.add(notice.worktree)
        if notice.kind == "done" and notice.worktree:
            if notice.worktree in self._done:
                return False
            self._done.add(notice.worktree)
        return True


# -- channels ------------------------------------------------------------------------------------------------


def desktop_session(env: Mapping[str, str] | None = None) -> bool:
    """Whether `notify-send` can reach a desktop from here: it is installed and a session bus or display is set."""
    env = os.environ if env is None else env
    return bool(shutil.which("notify-send")) and any(
        env.get(k) for k in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"))


def post_json(url: str, data: dict[str, Any]) -> None:
    _post(url, json.dumps(data).encode(), {"Content-Type": "application/json"})


def post_ntfy(url: str, notice: Notice) -> None:
    # ntfy takes the message as the body and the rest as headers (which must be Latin-1: the title is ASCII).
    title = notice.title.encode("ascii", "replace").decode()
    priority = "high" if notice.kind in ("waiting", "failed", "over_budget") else "default"
    _post(url, notice.text.encode(), {"Title": title, "Priority": priority, "Tags": notice.kind,
                                      "Content-Type": "text/plain; charset=utf-8"})


class DeliveryError(Exception):
    """A try that failed; `retry` says whether another may succeed (a network error, a 5xx, a 429)."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def _post(url: str, body: bytes, headers: dict[str, str]) -> None:
    request = urllib.request.Request(url, data=body, headers={"User-Agent": "daintree", **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            response.read(65536)
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"HTTP {exc.code}", retry=exc.code >= 500 or exc.code == 429) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise DeliveryError(str(getattr(exc, "reason", exc)), retry=True) from None


def run_command(argv: tuple[str, ...], notice: Notice) -> None:
    """The user's `notify.command`, with the notice's JSON on stdin (never on its command line)."""
    try:
        # In the home folder: started where the watcher or the dashboard runs (a worktree, the repository), a
        # `python3 -c` there imported the agent's `textwrap.py`.
        proc = subprocess.run(list(argv), input=json.dumps(notice.payload()), text=True, capture_output=True,
                              timeout=COMMAND_TIMEOUT, check=False, cwd=os.path.expanduser("~"))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeliveryError(str(exc), retry=False) from None
    if proc.returncode != 0:
        raise DeliveryError(f"exit {proc.returncode}: {proc.stderr.strip()[:200]}", retry=False)


def send_desktop(notice: Notice) -> None:
    # The body is markup to desktop notifiers (<a href>, entities): shown as text, never obeyed.
    urgency = "critical" if notice.kind in ("waiting", "failed") else "normal"
    try:
        proc = subprocess.run(["notify-send", "--app-name=daintree", "-u", urgency, "--", notice.title,
                               html.escape(notice.text, quote=False)],
                              capture_output=True, text=True, timeout=HTTP_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeliveryError(str(exc), retry=False) from None
    if proc.returncode != 0:
        raise DeliveryError(f"notify-send: {proc.stderr.strip()[:200] or proc.returncode}", retry=False)


# -- the outer terminal's own notification, through a dashboard -----------------------------------------------


def terminal_outbox(project: Project) -> Path:
    # Beside the lock files: a folder no sandbox sees (task text and statuses are the user's).
    return project.locks_dir / "notify-terminal"


def post_terminal_notice(project: Project, notice: Notice) -> None:
    """Leave the notice for a dashboard to show as its terminal's own notification (OSC 777 / OSC 9): where no
    desktop session exists, the terminal the dashboard runs in is the way to the person."""
    folder = private_dir(terminal_outbox(project))
    now = time.time()
    for stale in folder.glob("*.json"):
        with suppressed(OSError, ValueError):
            if now - float(stale.stem.split("-")[0]) > TERMINAL_NOTICE_TTL:
                stale.unlink()
    create_new(folder / f"{now:.6f}-{os.getpid()}.json", json.dumps(notice.payload()))


def claim_terminal_notices(project: Project) -> list[dict[str, Any]]:
    """The notices left for a dashboard's terminal, each taken by one dashboard only (renamed away: of two
    dashboards that try, one succeeds), oldest first; those older than TERMINAL_NOTICE_TTL are dropped."""
    folder = terminal_outbox(project)
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    except OSError:
        return []
    claimed = []
    now = time.time()
    for name in names:
        path = folder / name
        mine = folder / f"{name}.{os.getpid()}.taken"
        try:
            os.rename(path, mine)
        except OSError:
            continue  # another dashboard took it
        try:
            fd = os.open(mine, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                data = json.loads(fh.read(65536))
        except (OSError, ValueError):
            data = None
        finally:
            with suppressed(OSError):
                os.unlink(mine)
        if isinstance(data, dict) and isinstance(data.get("ts"), int | float) \
                and now - float(data["ts"]) <= TERMINAL_NOTICE_TTL + 30:
            claimed.append(data)
    return claimed


def osc_notification(payload: Mapping[str, Any], term_program: str | None = None) -> str:
    """The terminal's own notification for a notice: OSC 9 where the terminal reads that one (iTerm2, WezTerm,
    kitty, ghostty), OSC 777 elsewhere (foot, urxvt, VTE, Windows Terminal); every control of the text removed."""
    def clean(value: Any) -> str:
        return "".join(ch for ch in str(value or "") if ch.isprintable())

    worktree = clean(payload.get("worktree"))
    title = f"daintree: {worktree}" if worktree else "daintree"
    text = clean(payload.get("text"))
    program = term_program if term_program is not None else os.environ.get("TERM_PROGRAM", "")
    if program in ("iTerm.app", "WezTerm", "ghostty") or "kitty" in os.environ.get("TERM", ""):
        return f"\x1b]9;{title}: {text}\x1b\\"
    return f"\x1b]777;notify;{title.replace(';', ',')};{text.replace(';', ',')}\x1b\\"


# -- delivery -------------------------------------------------------------------------------------------------


Log = Callable[[str], None]


def _stderr_log(line: str) -> None:
    with suppressed(OSError, ValueError):
        sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
        sys.stderr.flush()


class _Channel:
    """One channel's queue and thread: its notices go out in order; HTTP tries are repeated with back-off."""

    def __init__(self, name: str, deliver: Callable[[Notice], None], log: Log) -> None:
        self.name = name
        self.deliver = deliver
        self.log = log
        self.jobs: queue.SimpleQueue[Notice | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"notify-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            notice = self.jobs.get()
            if notice is None:
                return
            for attempt, delay in enumerate((0.0, *RETRY_DELAYS)):
                time.sleep(delay)
                what = notice.kind + (f" of {notice.worktree}" if notice.worktree else "")
                try:
                    self.deliver(notice)
                    self.log(f"sent {what} by {self.name}")
                    break
                except DeliveryError as exc:
                    last = attempt == len(RETRY_DELAYS) or not exc.retry
                    self.log(f"{self.name}: {what} not sent ({exc})" + ("; given up" if last else "; trying again"))
                    if last:
                        break
                except Exception as exc:  # a channel's bug must not end the others' thread
                    self.log(f"{self.name}: {type(exc).__name__}: {exc}")
                    break


class Notifier:
    """Sends notices by the channels of a `NotifyConfig`, each on its own thread (`send` never blocks).

    Args:
        project: where a notice for a dashboard's terminal is left (the desktop channel without a desktop).
        config: the user's `[notify]`.
        now_hhmm: the local time as HH:MM, for quiet hours.
    """

    def __init__(self, project: Project, config: NotifyConfig, log: Log = _stderr_log,
                 now_hhmm: Callable[[], str] = lambda: time.strftime("%H:%M")) -> None:
        self.project = project
        self.config = config
        self.log = log
        self.now_hhmm = now_hhmm
        self._channels: dict[str, _Channel] = {}
        self.sent = 0

    def _channel(self, name: str) -> _Channel | None:
        if name in self._channels:
            return self._channels[name]
        cfg = self.config
        deliver: Callable[[Notice], None] | None = None
        if name == "webhook" and cfg.webhook:
            url = cfg.webhook
            deliver = lambda n: post_json(url, n.payload())  # noqa: E731
        elif name == "ntfy" and cfg.ntfy:
            ntfy = cfg.ntfy
            deliver = lambda n: post_ntfy(ntfy, n)  # noqa: E731
        elif name == "command" and cfg.command:
            argv = cfg.command
            deliver = lambda n: run_command(argv, n)  # noqa: E731
        elif name == "desktop" and cfg.desktop:
            deliver = send_desktop if desktop_session() else self._to_terminal
        if deliver is None:
            return None
        self._channels[name] = _Channel(name, deliver, self.log)
        return self._channels[name]

    def _to_terminal(self, notice: Notice) -> None:
        try:
            post_terminal_notice(self.project, notice)
        except OSError as exc:
            raise DeliveryError(str(exc), retry=False) from None

    def wanted(self, notice: Notice) -> bool:
        return notice.kind in self.config.kinds and not in_quiet_hours(self.config.quiet_hours, self.now_hhmm())

    def send(self, notice: Notice, force: bool = False) -> bool:
        """Queue the notice on every channel (False when its kind is off or it is quiet hours, unless `force`:
        `daintree notify test`)."""
        if not force and not self.wanted(notice):
            return False
        for name in self.config.channels:
            channel = self._channel(name)
            if channel is not None:
                channel.jobs.put(notice)
        self.sent += 1
        return True

    def close(self, timeout: float = 20.0) -> None:
        """Let what is queued go out (each channel's retries included, up to `timeout` in all)."""
        deadline = time.monotonic() + timeout
        for channel in self._channels.values():
            channel.jobs.put(None)
        for channel in self._channels.values():
            channel.thread.join(max(0.0, deadline - time.monotonic()))
