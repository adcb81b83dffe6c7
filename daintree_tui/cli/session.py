"""`daintree session ...`: who does it (agents in terminals)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from daintree_tui.cli.common import AddCommand, ctrl_c_stops
from daintree_tui.cli.output import emit, error, replayable, table, wants_json, write_line
from daintree_tui.core.errors import InputError
from daintree_tui.services import Services

if TYPE_CHECKING:
    from daintree_tui.services.observer import Transition


def cmd_session_start(args: argparse.Namespace, services: Services) -> int:
    info = services.ops.start_session(args.name, args.agent, prompt=args.prompt, resume=args.resume)
    verb = "resumed" if args.resume else "started"
    emit(args, info.to_dict(), f"{verb} session {info.session} ({info.agent}) in worktree {info.name}\n"
                               f"log: {info.log}")
    return 0


_STATUS_GLYPH = {"starting": "◌", "running": "▶", "waiting": "●", "stalled": "◌", "exited": "■"}


def cmd_session_list(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.sessions.presets import all_presets

    manager = services.sessions
    infos = manager.list()
    for info in infos:
        if str(info.status) != "exited":
            manager.update_usage(info.name)  # what the agent's records gained (a cache; a listing never acts)
    usage = manager.usage_summary([i.name for i in infos])
    presets = all_presets(services.project.config)
    data = []
    for i in infos:
        preset = presets.get(i.agent)
        data.append({**i.to_dict(), "agent_installed": preset.installed() if preset else None,
                     "usage": usage.get(i.name)})
    rows = []
    for i, d in zip(infos, data, strict=True):
        status = f"{_STATUS_GLYPH.get(str(i.status), '?')} {i.status}" + (
            f" ({i.exit_code})" if i.exit_code is not None else "") + (" over-budget" if i.over_budget else "") + (
            f" {i.limit}" if i.limit else "")
        u = d["usage"]
        cost = f"{u['tokens']['total']:,} tok ${u['cost']:.2f}" if u and u["tokens"]["total"] else "-"
        if u and u.get("trusted") is False:
            cost += " (untrusted records)"
        agent = i.agent + ("" if d["agent_installed"] is not False else " (not installed)")
        rows.append([i.name, i.session, agent, status, i.status_source, cost, str(i.pid or "-"),
                     _sandbox_cell(i.sandbox)])
    emit(args, data, table(rows, ["WORKTREE", "SESSION", "AGENT", "STATUS", "SOURCE", "USAGE", "PID", "SANDBOX"])
         or "no sessions")
    return 0


def _sandbox_cell(record: dict[str, Any] | None) -> str:
    """`bwrap`, or plainly `none` with the mode when a session runs unconfined (and why, when the sandbox was chosen
    but could not start with it)."""
    if not record:
        return "-"
    if record.get("at_start") == "failed":  # chosen, then bubblewrap could not start with the session
        return f"none ({record.get('mode')}: bwrap failed)"
    return str(record.get("backend")) if record.get("active") else f"none ({record.get('mode')})"


def cmd_session_send(args: argparse.Namespace, services: Services) -> int:
    context = args.files or args.task or args.clipboard
    if args.text is None and not context:
        raise InputError("send needs TEXT, or --file PATH..., --task or --clipboard")
    if args.text is not None and context:
        raise InputError("give either TEXT or --file/--task/--clipboard, not both")
    if context:
        text = services.send_context(args.name, files=args.files or [], task=args.task, clipboard=args.clipboard)
    else:
        text = args.text
        services.sessions.send(args.name, text, enter=not args.no_enter, paste=args.paste)
    emit(args, {"name": args.name, "sent": len(text)}, f"sent {len(text)} characters to {args.name}")
    return 0


def cmd_session_keys(args: argparse.Namespace, services: Services) -> int:
    services.sessions.keys(args.name, args.keys)
    emit(args, {"name": args.name, "keys": args.keys}, f"sent {' '.join(args.keys)} to {args.name}")
    return 0


def cmd_session_stop(args: argparse.Namespace, services: Services) -> int:
    stopped = services.ops.stop_session(args.name)
    if not stopped:
        services.sessions.require_known(args.name)  # a typo is an error; a worktree with no session, a no-op
    emit(args, {"name": args.name, "stopped": stopped},
         f"stopped session of {args.name}" if stopped else f"no session running for {args.name}")
    return 0


def cmd_session_capture(args: argparse.Namespace, services: Services) -> int:
    text = services.sessions.capture(args.name, history=args.history)
    emit(args, {"name": args.name, "screen": text}, text)
    return 0


LOG_TAIL_LIMIT = 16 * 1024 * 1024
# On a terminal -n N shows the readable lines of at most this much of the end: a full-screen agent's log has some in
# every few kilobytes, and one of megabytes of cursor moves and no text (`ESC [ H` over and over) took the 16 MB of
# LOG_TAIL_LIMIT read as text, a Python step for each move: half a minute of CPU.
TEXT_TAIL_LIMIT = 1024 * 1024


def cmd_session_log(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.follow import LastLines, first_line_start, follow_lines, read_tail
    from daintree_tui.sessions.last_words import could_hold_lines, readable_lines

    if args.lines < 0:
        raise InputError("--lines must be zero or more")
    project = services.project
    project.require_git()
    path = project.log_path(args.name)
    if not path.exists():
        services.sessions.require_known(args.name)  # a typo says so, whether followed or not
        if not args.follow:
            raise InputError(f"no log for worktree {args.name!r} ({path})")
    read = 0
    data = b""
    shown: list[str] = []  # on a terminal: the lines of text
    as_json = wants_json(args)
    # On a terminal, the agent's own controls would be obeyed, not shown: Codex's log switched the user's terminal
    # to the alternate screen, turned mouse reporting on and asked it questions whose answers landed at the
    # prompt. There it is printed as text (`--raw` for the bytes); a pipe or a file gets colours and cursor moves
    # only (it may end at a terminal too), `--raw` the bytes.
    as_text = not as_json and not args.raw and sys.stdout.isatty()
    if path.exists():
        # With -n, only the end is read: as many lines as asked and one more (the first may be cut). Each tail is
        # read once, at the regex engine's speed where it can be (see TEXT_TAIL_LIMIT); the last reading is kept.
        text_read: tuple[int, list[str] | None] = (-1, None)  # the last tail's size and lines (None: too few)
        last_lines = LastLines(args.lines)  # the last lines of the raw tail, found as it is read

        def text_of(tail: bytes, whole: bool) -> str:  # a tail cut in a line (or a cursor move): from the next line
            return tail[0 if whole else first_line_start(tail):].decode("utf-8", errors="replace")

        def enough(tail: bytes, whole: bool) -> bool:
            nonlocal text_read
            if not args.lines:
                return False
            if as_text:
                text = text_of(tail, whole)
                text_read = (len(tail), readable_lines(text) if could_hold_lines(text, args.lines + 1) else None)
                return len(text_read[1] or ()) > args.lines
            return last_lines(tail, whole)

        # -n N of a log with no line breaks in gigabytes shows what its last LOG_TAIL_LIMIT bytes hold.
        data, read = read_tail(path, enough, (TEXT_TAIL_LIMIT if as_text else LOG_TAIL_LIMIT) if args.lines else None)
        if as_text:
            kept = text_read[1] if text_read[0] == len(data) else None
            shown = readable_lines(text_of(data, len(data) == read)) if kept is None else kept
        elif args.lines:
            data = last_lines.of(data)
    if as_json and not args.follow:  # one document: the log is the agent's raw terminal output, as text
        emit(args, {"name": args.name, "path": str(path), "text": data.decode("utf-8", errors="replace")}, "")
        return 0
    if as_json:  # following streams one JSON object a line, as `worktree events --follow --json` does
        for line in data.decode("utf-8", errors="replace").splitlines():
            sys.stdout.write(json.dumps({"name": args.name, "line": line}) + "\n")
    elif as_text:  # the last N lines of text: a full-screen agent's raw log has few line breaks
        sys.stdout.write("".join(f"{line}\n" for line in shown[-args.lines if args.lines else 0:]))
    elif args.raw:
        sys.stdout.buffer.write(data)
    else:  # a pipe may still end at a terminal: colours and cursor moves, never a clipboard write or a query
        sys.stdout.write(replayable(data.decode("utf-8", errors="replace")))
    sys.stdout.flush()
    if args.follow:
        # Follow from where the read above stopped: a line written in between is not lost. Ctrl-C ends it between
        # two looks of the watch, as it ends the other loops: with the KeyboardInterrupt alone, the follower once
        # went on past its SIGINT on a loaded machine (its main thread in the watch's sleep, seen in a test).
        with ctrl_c_stops() as stop:
            if sys.stderr.isatty() and not services.sessions.running(args.name):  # else it looks hung, tail -f's way
                error(f"no session running for {args.name}: following its log until Ctrl-C")
            for line in follow_lines(path, offset=read, stop=stop):
                if as_json:
                    sys.stdout.write(json.dumps({"name": args.name, "line": line}) + "\n")
                elif as_text:
                    sys.stdout.write("".join(f"{text}\n" for text in readable_lines(line)))
                else:
                    sys.stdout.write((line if args.raw else replayable(line)) + "\n")
                sys.stdout.flush()
        if stop.is_set():
            error("interrupted")
            return 130
    return 0


def cmd_session_signal(args: argparse.Namespace, services: Services) -> int:
    services.observer.signal(args.name, args.state, exit_code=args.code, at=args.at)
    emit(args, {"name": args.name, "state": args.state}, f"{args.name}: {args.state}")
    return 0


def _transition_line(transition: Transition) -> str:
    code = f" ({transition.exit_code})" if transition.exit_code is not None else ""
    return f"{time.strftime('%H:%M:%S')}  {transition.name}: {transition.status}{code}"


def _transition_data(transition: Transition) -> dict[str, Any]:
    return {"name": transition.name, "status": str(transition.status), "exit_code": transition.exit_code}


def cmd_session_watch(args: argparse.Namespace, services: Services) -> int:
    if args.interval <= 0:
        raise InputError("--interval must be a positive number of seconds")
    services.sessions.host  # noqa: B018 - a clear error without tmux
    if args.once:
        transitions = services.observe_tick().transitions
        emit(args, [_transition_data(t) for t in transitions],
             lambda: "\n".join(_transition_line(t) for t in transitions) or "no changes")
        return 0

    def report(transition: Transition) -> None:
        line = json.dumps(_transition_data(transition)) if wants_json(args) else _transition_line(transition)
        write_line(sys.stdout, line)
        sys.stdout.flush()

    # Ctrl-C ends the loop between two ticks: inside one it could leave a lock taken, and exiting (which waits for
    # the hooks the tick started) then hung (seen once in 20-odd CI runs).
    with ctrl_c_stops() as stop:
        while not stop.is_set():
            for transition in services.observe_tick().transitions:
                report(transition)
            stop.wait(args.interval)
    error("interrupted")
    return 130


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    session = add(sub, "session", None, "sessions: who does it (agents in terminals)")
    ssub = session.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    p = add(ssub, "start", cmd_session_start, "start an agent in a worktree")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--agent", metavar="PRESET",
                   help="the agent (default: the one the worktree's last session ran, else default_agent)")
    p.add_argument("--prompt", help="first prompt (default: the bound task's subject and description)")
    p.add_argument("--resume", action="store_true",
                   help="continue the agent's last conversation in this worktree (its preset's resume command)")
    add(ssub, "list", cmd_session_list, "list sessions, their status (and its source) and usage")
    p = add(ssub, "send", cmd_session_send, "type text into a session (then Enter)")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("text", nargs="?", help="the text to type (or --task, --file, --clipboard)")
    p.add_argument("--no-enter", action="store_true", help="do not press Enter after the text")
    p.add_argument("--paste", action="store_true", help="send as one bracketed paste")
    p.add_argument("--file", dest="files", action="extend", nargs="+", metavar="PATH",
                   help="send files (path and content, as fenced blocks): --file A B, or --file A --file B")
    p.add_argument("--task", action="store_true", help="send the bound task's subject and description")
    p.add_argument("--clipboard", action="store_true", help="send the clipboard's text")
    p = add(ssub, "keys", cmd_session_keys, "send tmux key names (Enter, C-c, Up) to a session")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("keys", nargs="+", metavar="KEY", help="tmux key names: Enter, Escape, C-c, Up, ...")
    p = add(ssub, "stop", cmd_session_stop, "stop a session")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p = add(ssub, "capture", cmd_session_capture, "print a session's screen")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--history", type=int, default=0, metavar="N", help="include N lines of scrollback")
    p = add(ssub, "log", cmd_session_log, "print a session's output log")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new output until interrupted")
    p.add_argument("--lines", "-n", type=int, default=0, metavar="N", help="only the last N lines")
    p.add_argument("--raw", action="store_true",
                   help="the agent's bytes, terminal controls and all, also on a terminal (a pipe always gets them)")
    p = add(ssub, "signal", cmd_session_signal, "an agent's hook reports its state (waiting, running, exited)")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("state", help="waiting, running or exited")
    p.add_argument("--code", type=int, help="exit code, with exited")
    p.add_argument("--at", type=float, help=argparse.SUPPRESS)  # when the hook fired (epoch seconds)
    p.add_argument("payload", nargs="?", help=argparse.SUPPRESS)  # what the agent passes its hook (Codex: JSON)
    p = add(ssub, "watch", cmd_session_watch,
            "record status changes as they happen (events, on_waiting/on_session_exit hooks) until interrupted")
    p.add_argument("--once", action="store_true", help="one look, then exit")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between looks (default 1)")
