"""Validation of what arrives from outside: names, numbers, and state records read back from disk.

Everything under `.tasks/` and `.worktrees/` may have been written by someone else (a committed file in a cloned
repository, an agent, a crash). A record is checked field by field here; a bad one is refused with a reason the
caller turns into a warning, never an `internal error` that blocks other commands.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from daintree_tui.core.errors import InputError
from daintree_tui.core.log import warn

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
COMMIT_RE = re.compile(r"[0-9a-f]{0,64}")

# Files and folders our state keeps in `.worktrees/` beside the worktree directories. Names that start with a dot
# cannot be worktree names; these can, so a worktree may not take them (nor anything ending like a state file).
STATE_NAMES = frozenset({
    "index.json", "events.jsonl", "events.jsonl.1", "tmux.conf", "approvals.json", "bakeoffs.json", "queue.json",
})
# `.hooks`: worktree X's hook log is `.logs/X.hooks.log`, the session log a worktree named `X.hooks` would have.
STATE_SUFFIXES = (".json", ".jsonl", ".bak", ".conf", ".tmp", ".lock", ".hooks")


def name_problem(name: object, *, new: bool = True) -> str | None:
    """Why `name` cannot be a worktree name, or None when it can. `new`: also refuse the names of state files
    (an existing worktree of such a name, from before the rule, can still be addressed and removed)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name.endswith((".", ".lock")) or ".." in name:
        return ("use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, without '..' and "
                "not ending in '.' or '.lock'")
    if new and (name.lower() in STATE_NAMES or name.lower().endswith(STATE_SUFFIXES)):
        return f"it is reserved for daintree's state files (not one of {', '.join(sorted(STATE_NAMES))}, " \
               f"nor ending in {', '.join(STATE_SUFFIXES)})"
    return None


def check_name(name: str, *, new: bool = True) -> None:
    """Raise InputError (exit 2) when `name` cannot be a worktree name."""
    problem = name_problem(name, new=new)
    if problem:
        raise InputError(f"invalid worktree name {name!r}: {problem}")


def finite_number(value: object, what: str, *, minimum: float | None = None, maximum: float | None = None,
                  exclusive_minimum: bool = False) -> float:
    """A finite float within bounds, or InputError naming `what` (`nan`, `inf` and negatives are bad input)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        number = float(value)  # type: ignore[arg-type]
        if minimum is not None and (number < minimum or (exclusive_minimum and number == minimum)):
            ok = False
        if maximum is not None and number > maximum:
            ok = False
    if not ok:
        low = "" if minimum is None else (f"> {minimum:g}" if exclusive_minimum else f">= {minimum:g}")
        high = "" if maximum is None else f"<= {maximum:g}"
        bounds = " and ".join(b for b in (low, high) if b)
        raise InputError(f"{what} must be a finite number{' ' + bounds if bounds else ''} (got {value!r})")
    return float(value)  # type: ignore[arg-type]


def finite_seconds(value: object, what: str = "--timeout", maximum: float = 7 * 86400) -> float:
    """A positive, finite number of seconds (at most a week by default)."""
    return finite_number(value, what, minimum=0, maximum=maximum, exclusive_minimum=True)


def count(value: object, what: str, maximum: int = 10_000_000) -> int:
    """A whole number from 0 to `maximum`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise InputError(f"{what} must be a whole number from 0 to {maximum} (got {value!r})")
    return value


def port(value: object, what: str = "port") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        raise InputError(f"{what} must be a port number from 1 to 65535 (got {value!r})")
    return value


# -- records read back from disk ---------------------------------------------------------------------------------


class RecordError(ValueError):
    """A stored record of the wrong shape; callers skip it with a warning."""


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI) and the bidi overrides. Free text
# (task subjects and descriptions, committed or written by an agent) reaches terminals: the CLI's, the
# dashboard's (which passes ESC through to the terminal), an agent's pane. Printed raw, `ESC ] 52` writes the
# user's clipboard, `ESC [ 2 J` rewrites what they see.
# Also the lone surrogates of bytes that are not UTF-8 (a name read with surrogateescape): shown as the byte
# (`\xff`), which no terminal (and no strict UTF-8 stream) could take as they are.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def files(n: int) -> str:
    """'1 file', '3 files': what the CLI and the dashboard said as '1 file(s)'."""
    return f"{n} file" if n == 1 else f"{n} files"


def escape_controls(text: str) -> str:
    """`text` with every terminal control shown as an escape (`\\x1b`), so it is seen, never obeyed."""
    return _CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\x{code - 0xdc00:02x}" if 0xdc80 <= code <= 0xdcff else f"\\u{code:04x}"


def field(data: dict[str, Any], key: str, kind: str, *, default: Any = None, required: bool = False) -> Any:
    """One field of a record, checked by kind: `str`, `int`, `id` (int >= 1), `number`, `int?`, `number?`,
    `ints`, `ports`, `dict`. A missing optional field gives `default`; a wrong type raises RecordError."""
    if key not in data or (data[key] is None and kind.endswith("?")):
        if required:
            raise RecordError(f"missing {key!r}")
        return default
    value = data[key]
    base = kind.rstrip("?")
    ok = {
        "str": isinstance(value, str),
        "int": is_int(value),
        "id": is_int(value) and 1 <= value < 2**63,
        "number": is_number(value),
        "ints": isinstance(value, list) and all(is_int(v) and 1 <= v < 2**63 for v in value),
        "ports": isinstance(value, list) and all(is_int(v) and 1 <= v <= 65535 for v in value),
        "dict": isinstance(value, dict),
    }[base]
    if not ok:
        raise RecordError(f"{key!r} must be {base} (got {type(value).__name__})")
    return value


def record(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RecordError(f"{what} is a {type(data).__name__}, not an object")
    return data


def session_record(data: object) -> dict[str, Any]:
    """A session record (`.worktrees/.sessions/<name>.json`) with every field of the wrong type dropped."""
    if not isinstance(data, dict):
        return {}
    clean = dict(data)
    for key, ok in (("agent", lambda v: isinstance(v, str)), ("status", lambda v: isinstance(v, str)),
                    ("started_at", is_number), ("exit_code", lambda v: v is None or is_int(v)),
                    ("command", lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v)),
                    ("host", lambda v: isinstance(v, str))):
        if key in clean and not ok(clean[key]):
            del clean[key]
    signal = clean.get("signal")
    if signal is not None and not (isinstance(signal, dict) and isinstance(signal.get("state"), str | None)
                                   and (signal.get("ts") is None or is_number(signal.get("ts")))):
        clean["signal"] = None
    return clean


POLICED_COMMANDS = {"commit": "commit", "merge": "merge", "pr": "pr", "remove": "remove", "rm": "remove"}


def approval_problem(data: object) -> str | None:
    """Why an approval request (`.worktrees/approvals.json`) cannot be used, or None. Approving one runs its
    argv, so the argv must be the one policed `daintree worktree <action> NAME ...` it claims to be."""
    try:
        rec = record(data, "approval request")
        field(rec, "id", "id", required=True)
        status = field(rec, "status", "str", required=True)
        action = field(rec, "action", "str", required=True)
        worktree = field(rec, "worktree", "str", required=True)
        field(rec, "role", "str?")
        field(rec, "created_at", "number?")
        field(rec, "resolved_at", "number?")
        argv = rec.get("argv")
    except RecordError as exc:
        return str(exc)
    if status not in ("pending", "approved", "rejected"):
        return f"unknown status {status!r}"
    if not (isinstance(argv, list) and len(argv) >= 3 and all(isinstance(a, str) for a in argv)):
        return "argv is not a daintree command line"
    start = _leading_options(argv)
    triple = argv[start:start + 3]
    if (len(triple) < 3 or triple[0] not in ("worktree", "wt") or POLICED_COMMANDS.get(triple[1]) != action
            or name_problem(triple[2], new=False) or name_problem(worktree, new=False)):
        return f"argv {argv!r} is not `daintree worktree {action} NAME ...`"
    return None


def _leading_options(argv: list[str]) -> int:
    """How many leading items are global options (`--json`, `--repo PATH`); the approver appends its own
    `--repo`, which wins."""
    i = 0
    while i < len(argv):
        if argv[i] == "--json" or argv[i].startswith("--repo="):
            i += 1
        elif argv[i] == "--repo":
            i += 2
        else:
            break
    return i


def bakeoff_problem(data: object) -> str | None:
    """Why a bake-off record (`.worktrees/bakeoffs.json`) cannot be used, or None."""
    try:
        rec = record(data, "bake-off")
        bakeoff_id = field(rec, "id", "str", required=True)
        field(rec, "task_id", "id", required=True)
        field(rec, "status", "str", required=True)
        field(rec, "score_command", "str?")
        field(rec, "created_at", "number?")
        field(rec, "picked", "str?")
        for key in ("agents", "scores"):
            if not isinstance(rec.get(key, []), list):
                raise RecordError(f"{key!r} must be a list")
        if not all(isinstance(a, str) for a in rec.get("agents", [])):
            raise RecordError("'agents' must be names")
        candidates = rec.get("candidates", [])
    except RecordError as exc:
        return str(exc)
    if not re.fullmatch(r"b[0-9]{1,18}", bakeoff_id):
        return f"bad id {bakeoff_id!r}"
    if not (isinstance(candidates, list) and all(name_problem(c, new=False) is None for c in candidates)):
        return "candidates must be worktree names"
    return None


def valid_records(raw: list[object], problem_of: Callable[[object], str | None], what: str) -> list[dict[str, Any]]:
    """The records that pass `problem_of`; each one that does not is skipped with a warning naming why."""
    out: list[dict[str, Any]] = []
    for item in raw:
        problem = problem_of(item)
        if problem or not isinstance(item, dict):
            warn(f"skipping a malformed {what}: {problem}")
        else:
            out.append(item)
    return out
