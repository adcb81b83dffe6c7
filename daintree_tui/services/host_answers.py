"""What a host answers, typed and capped before anything here uses it.

A host is another machine: its daintree, its shell and anything else on it may be broken or hostile, so what it
prints is data to check (docs/design.md 2a), like a file an agent wrote. Three caps hold before a value is used:
bytes and time (`RemoteHost.run_command` stops reading an answer past MAX_ANSWER_BYTES or its timeout, killing ssh),
and count (a listing of more than MAX_RECORDS items is refused here). Then every value is checked by kind and range:
a wrong type, a missing key, a bool where a number goes, NaN or a number out of range is one OperationError naming
the host, the command and the field (`host X answered `worktree list --json`: worktree a: session.exit_code is not a
whole number from -255 to 255 (got a str)`), never the TypeError or ValueError that the CLI reported as an internal
error and that ended the dashboard's host poller.

What a reader returns is a fresh dict of the known keys only, its free text stripped of terminal controls (shown
escaped, `\\x1b`) and cut to a length: a host's extra keys and nested junk go no further, and an escape sequence
from a host never reaches the dashboard or the user's terminal as one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from daintree_tui.core.errors import OperationError
from daintree_tui.core.models import TaskStatus, WorktreeStatus
from daintree_tui.core.validate import COMMIT_RE, escape_controls, name_problem
from daintree_tui.sessions.status import SessionStatus

MAX_RECORDS = 1_000  # worktrees or tasks in one listing (a host's queue runs a few sessions)
MAX_TEXT = 500  # characters of free text kept (a subject, an agent's name, a model): the rest is cut
MAX_PATH = 4096  # PATH_MAX
MAX_ID = 2**53  # a task id (exact in every JSON reader)
MAX_COUNT = 2**63 - 1  # a size or a count (an int64)
MAX_EPOCH = 1e11  # seconds since 1970 (the year 5138): a time past this is no time
EXIT_CODES = (-255, 255)  # a process's exit status, or minus the signal that ended it
MAX_PID = 2**31 - 1
MAX_PORTS = 100

# tmux session and socket names (`dt-<name>`, `daintree-<hash>`): they go back to the host as arguments of
# `tmux -L SOCKET attach-session -t =SESSION`.
_TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_REF_RE = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\-][^\x00-\x20\x7f~^:?*\[\\]{0,254}")
_CODE_RE = re.compile(r"[0-9]{1,3}")  # a probe's exit status in `host check`
_EPOCH_RE = re.compile(r"[0-9]{1,11}(\.[0-9]{1,9})?")


def clean_text(value: str, limit: int = MAX_TEXT) -> str:
    """`value` with terminal controls shown escaped and cut to `limit` characters (marked with an ellipsis)."""
    shown = escape_controls(value[: limit * 4])  # cut first: an escape takes at most four characters
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _kind(value: object) -> str:
    """What a bad value was, short and safe to print (never the value itself: it may be huge or a control)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int" if abs(value) < 2**64 else f"an int of {value.bit_length()} bits"
    if isinstance(value, float):
        return "a float" if math.isfinite(value) else f"{value!r}"
    if isinstance(value, str):
        return f"a str {clean_text(value, 24)!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Reader:
    """Checks one answer of one host; every failure names the host, the command and the field."""

    def __init__(self, host: str, command: str) -> None:
        self.host = host
        self.command = command

    def fail(self, where: str, expected: str, value: object) -> NoReturn:
        raise OperationError(f"host {self.host} answered `{self.command}`: {where} is not {expected} "
                             f"(got {_kind(value)})")

    def record(self, value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, "an object", value)
        return value

    def items(self, value: object, where: str, limit: int = MAX_RECORDS) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, "a list", value)
        if len(value) > limit:
            raise OperationError(f"host {self.host} answered `{self.command}`: {len(value)} items in {where}, "
                                 f"more than the {limit} taken from a host")
        return value

    def whole(self, value: object, where: str, low: int, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            self.fail(where, f"a whole number from {low} to {high}", value)
        return value

    def number(self, value: object, where: str, low: float, high: float) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) \
                or not low <= value <= high:
            self.fail(where, f"a number from {low:g} to {high:g}", value)
        return float(value)

    def flag(self, value: object, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, "true or false", value)
        return value

    def text(self, value: object, where: str, limit: int = MAX_TEXT) -> str:
        if not isinstance(value, str):
            self.fail(where, "a string", value)
        return clean_text(value, limit)

    def choice(self, value: object, where: str, choices: Iterable[str]) -> str:
        allowed = list(choices)
        if not isinstance(value, str) or value not in allowed:
            self.fail(where, f"one of {', '.join(allowed)}", value)
        return value

    def name(self, value: object, where: str) -> str:
        if not isinstance(value, str) or name_problem(value, new=False):
            self.fail(where, "a worktree name", value)
        return value

    def token(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not _TOKEN_RE.fullmatch(value):
            self.fail(where, "a tmux name (letters, digits, '.', '_', '-')", value)
        return value

    def path(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value.startswith("/") or len(value) > MAX_PATH \
                or re.search(r"[\x00-\x1f\x7f-\x9f]", value):
            self.fail(where, "an absolute path without control characters", value)
        return value

    def ref(self, value: object, where: str) -> str:
        if not isinstance(value, str) or (value and not _REF_RE.fullmatch(value)):
            self.fail(where, "a git ref name", value)
        return value

    # Optional fields: absent or null is `default`; present, it must be what it says.

    def optional(self, data: dict[str, Any], key: str, where: str, check: Any, *args: Any,
                 default: Any = None) -> Any:
        value = data.get(key)
        return default if value is None else check(value, f"{where}.{key}", *args)


# -- answers ------------------------------------------------------------------------------------------------------


def worktree_list(host: str, data: object) -> list[dict[str, Any]]:
    """`worktree list --json`: every worktree, each with its git facts, disk use and session."""
    reader = Reader(host, "worktree list --json")
    items = reader.items(data, "the answer")
    out = [worktree(reader, item, f"worktree {i + 1}") for i, item in enumerate(items)]
    seen: set[str] = set()
    for record in out:
        # A name is a row's key, a session's and an attach's: named twice, the table's second row of that key
        # raised DuplicateKey and ended the dashboard.
        if record["name"] in seen:
            raise OperationError(f"host {host} answered `worktree list --json`: worktree {record['name']} is "
                                 "listed twice")
        seen.add(record["name"])
        if record["session"] is not None and record["session"]["name"] != record["name"]:
            reader.fail(f"worktree {record['name']}.session.name", "the name of its worktree",
                        record["session"]["name"])
    return out


def worktree(reader: Reader, data: object, where: str) -> dict[str, Any]:
    """One worktree record (an index entry plus `facts`, `session` and `disk_bytes`)."""
    rec = reader.record(data, where)
    name = reader.name(rec.get("name"), f"{where}.name")
    where = f"worktree {name}"
    r = reader
    out: dict[str, Any] = {
        "name": name,
        "path": r.path(rec.get("path"), f"{where}.path"),
        "branch": r.optional(rec, "branch", where, r.ref, default=""),
        "base_ref": r.optional(rec, "base_ref", where, r.ref, default=""),
        "base_commit": r.optional(rec, "base_commit", where, _commit(r), default=""),
        "task_id": r.optional(rec, "task_id", where, r.whole, 1, MAX_ID),
        "status": r.optional(rec, "status", where, r.choice, [str(s) for s in WorktreeStatus], default="active"),
        "ports": r.optional(rec, "ports", where, _ports(r), default=[]),
        "created_at": r.optional(rec, "created_at", where, r.number, 0, MAX_EPOCH, default=0.0),
    }
    for key in ("kept_at", "removed_at"):
        stamp = r.optional(rec, key, where, r.number, 0, MAX_EPOCH)
        if stamp is not None:
            out[key] = stamp
    facts = rec.get("facts")
    if facts is not None:
        raw = r.record(facts, f"{where}.facts")
        out["facts"] = {"exists": r.flag(raw.get("exists"), f"{where}.facts.exists"),
                        **{key: r.optional(raw, key, f"{where}.facts", r.whole, 0, MAX_COUNT, default=0)
                           for key in ("dirty", "ahead", "behind")}}
    session_data = rec.get("session")
    out["session"] = None if session_data is None else session(reader, session_data, f"{where}.session")
    out["disk_bytes"] = r.optional(rec, "disk_bytes", where, r.whole, 0, MAX_COUNT)
    return out


def session(reader: Reader, data: object, where: str) -> dict[str, Any]:
    """One session (`session list --json`, or a worktree's `session`): what the dashboard shows and attaches."""
    r = reader
    rec = r.record(data, where)
    return {
        "name": r.name(rec.get("name"), f"{where}.name"),
        "session": r.token(rec.get("session"), f"{where}.session"),
        "agent": r.text(rec.get("agent"), f"{where}.agent", 64),
        "status": r.choice(rec.get("status"), f"{where}.status", [str(s) for s in SessionStatus]),
        "exit_code": r.optional(rec, "exit_code", where, r.whole, *EXIT_CODES),
        "pid": r.optional(rec, "pid", where, r.whole, 1, MAX_PID),
        "started_at": r.optional(rec, "started_at", where, r.number, 0, MAX_EPOCH, default=0.0),
        "log": r.optional(rec, "log", where, r.text, MAX_PATH, default=""),
        "persistent": r.optional(rec, "persistent", where, r.flag, default=True),
        "socket": r.optional(rec, "socket", where, r.token),
        "tmux_conf": r.optional(rec, "tmux_conf", where, r.path),
        "status_source": r.optional(rec, "status_source", where, r.text, 32, default="output"),
        "usage": r.optional(rec, "usage", where, _usage(r)),
    }


def task(host: str, data: object, command: str) -> dict[str, Any]:
    """One task as a host's `task create|show --json` printed it."""
    r = Reader(host, command)
    rec = r.record(data, "the answer")
    task_id = r.whole(rec.get("id"), "the task's id", 1, MAX_ID)
    where = f"task {task_id}"
    worktree_name = rec.get("worktree")
    return {
        "id": task_id,
        "subject": r.optional(rec, "subject", where, r.text, default=""),
        "status": r.optional(rec, "status", where, r.choice, [str(s) for s in TaskStatus], default="pending"),
        "owner": r.optional(rec, "owner", where, r.text, 200, default=""),
        "worktree": r.name(worktree_name, f"{where}.worktree") if worktree_name else "",
        "agent": r.optional(rec, "agent", where, r.text, 64, default=""),
    }


MAX_AGENTS = 200  # presets in one `agents --json` (the built-in ones and a config's own)


def agents(host: str, data: object) -> dict[str, dict[str, bool]]:
    """`agents --json`: each preset of the host's config by name (a tmux-like name: it goes back to the host as
    `--agent NAME`), with whether its program is installed there and whether it is the host's default agent."""
    reader = Reader(host, "agents --json")
    out: dict[str, dict[str, bool]] = {}
    for i, item in enumerate(reader.items(data, "the answer", MAX_AGENTS)):
        rec = reader.record(item, f"agent {i + 1}")
        name = reader.token(rec.get("name"), f"agent {i + 1}.name")
        out[name] = {"installed": reader.optional(rec, "installed", f"agent {name}", reader.flag, default=True),
                     "default": reader.optional(rec, "default", f"agent {name}", reader.flag, default=False)}
    return out


def created_worktree(host: str, data: object, name: str) -> dict[str, Any]:
    """What `worktree create NAME --json` printed: worktree NAME (its name is shown, keyed and attached here)."""
    reader = Reader(host, "worktree create --json")
    made = worktree(reader, data, "the answer")
    if made["name"] != name:
        raise OperationError(f"host {host} answered `worktree create --json`: worktree {made['name']}, not the "
                             f"{name} asked for")
    return made


def _commit(r: Reader) -> Any:
    def check(value: object, where: str) -> str:
        if not isinstance(value, str) or not COMMIT_RE.fullmatch(value):
            r.fail(where, "a commit id", value)
        return value
    return check


def _ports(r: Reader) -> Any:
    def check(value: object, where: str) -> list[int]:
        return [r.whole(p, f"{where}[{i}]", 1, 65535) for i, p in enumerate(r.items(value, where, MAX_PORTS))]
    return check


def _usage(r: Reader) -> Any:
    """Tokens and estimated cost of a session's run: numbers the dashboard formats (`${cost:.2f}`)."""
    def check(value: object, where: str) -> dict[str, Any]:
        rec = r.record(value, where)
        tokens = r.record(rec.get("tokens") or {}, f"{where}.tokens")
        return {
            # Signed: an agent's own records may correct an earlier one (usage.Tokens.clamp), and a sum of them
            # below zero is odd but no reason to refuse a whole host.
            "tokens": {key: r.optional(tokens, key, f"{where}.tokens", r.whole, -MAX_COUNT, MAX_COUNT, default=0)
                       for key in ("input", "output", "cache_read", "cache_write", "total")},
            "cost": r.optional(rec, "cost", where, r.number, -1e12, 1e12, default=0.0),
            "model": r.optional(rec, "model", where, r.text, 100, default=""),
            "unpriced_models": [r.text(m, f"{where}.unpriced_models", 100)
                                for m in r.items(rec.get("unpriced_models") or [], f"{where}.unpriced_models", 50)],
        }
    return check


# -- `host check` --------------------------------------------------------------------------------------------------


def probe_lines(text: str, limit: int = 200) -> dict[str, tuple[int, str]]:
    """The `name<TAB>status<TAB>first line` lines of `host check`'s probe script: the status an ASCII number of at
    most three digits (`²` is a digit to str.isdigit, and int() refuses it), the line cut and escaped."""
    probes: dict[str, tuple[int, str]] = {}
    for line in text.splitlines()[:50]:
        parts = line.split("\t", 2)
        if len(parts) == 3 and _CODE_RE.fullmatch(parts[1]) and parts[0] not in probes:
            probes[parts[0]] = (int(parts[1]), clean_text(parts[2].strip(), limit))
    return probes


def epoch(text: str) -> float | None:
    """A host's `date +%s.%N` (or `date +%s` where `%N` is not known: its literal `.N` is dropped), or None when it
    is not one (a 5,000-digit number made int() raise)."""
    text = text.strip().removesuffix(".N").removesuffix("N")
    return float(text) if _EPOCH_RE.fullmatch(text) else None
