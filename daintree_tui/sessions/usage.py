"""Token usage from the agents' own records, read incrementally from the tail, and its estimated cost.

Pure: no project, no tmux. A `TailState` remembers where reading stopped in one record file (inode + offset +
an unfinished last line), so each look costs only what was appended since. A file that shrank or was replaced
(truncation, rotation) is read again from its start; the parsers deduplicate what they have already counted,
so reading a line twice never counts its tokens twice. The agent writes these files: they are opened without
following links (`open_record`), only regular ones are read, at most MAX_RECORD_BYTES of each, and what made one
untrustworthy is said (`TailState.problem`, kept by sessions/records.py).

Each agent writes its records differently; a parser turns one record (one JSON line) into the tokens it adds:
- Claude Code: transcript lines with `message.usage` (input_tokens, output_tokens, cache_creation_input_tokens,
  cache_read_input_tokens); several lines of one streamed message repeat its usage, so counted per message id.
- Codex: rollout lines `{"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage":
  ...}}}`; totals are cumulative, so the delta from the previous total is counted. `input_tokens` includes
  `cached_input_tokens`.
- Gemini CLI: chat recording lines (JSONL) of messages `{"id", "type": "gemini", "model", "tokens": {"input",
  "output", "cached", "thoughts", "tool", "total"}}`; a message is re-appended when it changes, so counted per id.
- opencode: lines its daintree plugin appends from `message.updated` events: `{"id", "model", "cost", "tokens":
  {"input", "output", "reasoning", "cache": {"read", "write"}}}`, per message id (opencode reports its own cost).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_CHUNK = 8 * 1024 * 1024  # read at most this much per look; the rest comes at the next
# A record line longer than this is no usage record (an assistant message is bounded by its output tokens): it is
# skipped to its end. The agent writes these files: a line that never ends (a sparse file of zeros) grew the kept
# unfinished line by MAX_CHUNK at every look, in memory and in the session's usage.json.
MAX_LINE = 1024 * 1024
MAX_TRACKED_IDS = 2000  # message ids remembered for deduplication (old ones never grow again)
# Of one record file, at most this much is ever read: the agent writes it, and a file that keeps growing (or a
# sparse one) is not read without end. Past it the file counts no more, and its run's usage says so (untrusted).
MAX_RECORD_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Tokens:
    """Tokens of one or more model calls. `input` excludes cache reads and writes."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.output + other.output, self.cache_read + other.cache_read,
                      self.cache_write + other.cache_write)

    def __sub__(self, other: Tokens) -> Tokens:
        return Tokens(self.input - other.input, self.output - other.output, self.cache_read - other.cache_read,
                      self.cache_write - other.cache_write)

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def clamp(self) -> Tokens:
        return Tokens(max(0, self.input), max(0, self.output), max(0, self.cache_read), max(0, self.cache_write))

    def to_dict(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_write": self.cache_write, "total": self.total}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Tokens:
        data = data or {}
        return cls(*(int(data.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")))


@dataclass(frozen=True)
class UsageRecord:
    """What one record adds: tokens, the model, when, and the agent's own cost figure when it reports one."""

    tokens: Tokens
    model: str = ""
    ts: float = 0.0
    reported_cost: float | None = None


# -- reading the tail ------------------------------------------------------------------------------------------


@dataclass
class TailState:
    """Where reading one file stopped."""

    inode: int | None = None
    offset: int = 0
    partial: bytes = b""
    resets: int = 0  # how often the file was found truncated or replaced
    skipping: bool = False  # inside a line longer than MAX_LINE: dropped up to its end
    read: int = 0  # bytes read from it so far (at most MAX_RECORD_BYTES)
    # Why this look could not trust the file (a link, not a regular file, shrunk, replaced, vanished after it was
    # counted, too large); not kept: the run's usage keeps what was found (see sessions/records.py).
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"inode": self.inode, "offset": self.offset, "partial": self.partial.decode("utf-8", "replace"),
                "resets": self.resets, "skipping": self.skipping, "read": self.read}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TailState:
        return cls(data.get("inode"), int(data.get("offset") or 0), str(data.get("partial") or "").encode(),
                   int(data.get("resets") or 0), data.get("skipping") is True, int(data.get("read") or 0))


_NO_FOLLOW = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_record(path: Path, root: Path | None = None) -> int:
    """A descriptor of record file `path` for reading, never through a symbolic link: with `root` (the folder the
    outside chose for the session's records), `path` must lie inside it and no folder below `root` down to the file
    may be a link either; each is opened relative to the one above, so a folder swapped for a link after it was
    listed is refused too. Non-blocking: a FIFO opens at once (and is no regular file: see `read_new_lines`).

    Raises:
        OSError: no such file; ELOOP for a link on the way; EINVAL for a path outside `root`.
    """
    if root is None:
        return os.open(path, _NO_FOLLOW)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ()
    if not parts or ".." in parts:
        raise OSError(errno.EINVAL, "not inside the session's record folder", str(path))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the outside's choice: a link of the user's
    try:
        for part in parts[:-1]:
            sub = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        return os.open(parts[-1], _NO_FOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def read_new_lines(path: Path, state: TailState, root: Path | None = None) -> list[str]:
    """Complete lines appended to `path` since `state` (which is updated). A replaced or shrunk file starts over
    (its parser counts nothing twice), and `state.problem` says so; never through a link (see `open_record`)."""
    state.problem = ""
    try:
        fd = open_record(path, root)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EINVAL):
            state.problem = "a symbolic link" if exc.errno != errno.EINVAL else "outside the session's folder"
        elif exc.errno == errno.ENOENT and state.offset:
            state.problem = "deleted after it was counted"
        return []
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                state.problem = "not a regular file"
                return []
            if state.inode is not None and (st.st_ino != state.inode or st.st_size < state.offset):
                state.problem = "replaced after it was counted" if st.st_ino != state.inode else \
                    "shrank after it was counted"
                state.offset, state.partial, state.skipping = 0, b"", False
                state.resets += 1
            state.inode = st.st_ino
            if st.st_size == state.offset:
                return []
            room = MAX_RECORD_BYTES - state.read
            if room <= 0:
                state.problem = f"larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB"
                return []
            fh.seek(state.offset)
            data = fh.read(min(st.st_size - state.offset, MAX_CHUNK, room))
    except OSError:
        return []
    state.offset += len(data)
    state.read += len(data)
    data = state.partial + data
    if state.skipping:
        end = data.find(b"\n")
        if end < 0:
            state.partial = b""
            return []
        data, state.skipping = data[end + 1:], False
    cut = data.rfind(b"\n")
    state.partial = data[cut + 1:]
    if len(state.partial) > MAX_LINE:
        state.partial, state.skipping = b"", True
    if cut < 0:
        return []
    return [line.decode("utf-8", "replace") for line in data[:cut].split(b"\n")
            if line.strip() and len(line) <= MAX_LINE]


# The agent writes its records (its state folder is writable in its sandbox): a count is a finite number of at
# least 0 (`1e999` raised OverflowError out of every observer tick, a negative count took tokens off the total),
# and a time outside 2001..2100 is no time (0: the record counts when it is read).
_LATEST_TS = 4102444800.0  # 2100-01-01


def _iso_ts(value: Any) -> float:
    ts = 0.0
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        ts = float(value) / (1000.0 if value > 1e11 else 1.0)
    elif isinstance(value, str) and value:
        from datetime import datetime

        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError):
            return 0.0
    return ts if 978307200.0 <= ts < _LATEST_TS else 0.0


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return max(0, int(value))


# -- parsers ---------------------------------------------------------------------------------------------------


class UsageParser:
    """Turns record lines into `UsageRecord`s; keeps what it needs to count each message once."""

    kind = "none"

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        self.state: dict[str, Any] = dict(state or {})
        self.unparsed = 0  # lines of the last `feed` that were no JSON: the agent's own records always are

    def feed(self, lines: Iterable[str]) -> list[UsageRecord]:
        out = []
        self.unparsed = 0
        for line in lines:
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested deeper than the parser goes
                self.unparsed += 1
                continue  # a torn or foreign line: skip it
            if isinstance(rec, dict):
                out += self.parse(rec)
        return out

    def parse(self, rec: dict[str, Any]) -> list[UsageRecord]:
        return []

    def reset(self) -> None:
        """The file was truncated or replaced: what it holds now is new content (ids already seen stay seen)."""

    def _per_id_delta(self, msg_id: str, tokens: Tokens) -> Tokens:
        """What `tokens` adds for message `msg_id` beyond what was already counted for it (the maximum seen)."""
        seen: dict[str, list[int]] = self.state.setdefault("seen", {})
        prior = Tokens(*seen.get(msg_id, [0, 0, 0, 0]))
        top = Tokens(max(prior.input, tokens.input), max(prior.output, tokens.output),
                     max(prior.cache_read, tokens.cache_read), max(prior.cache_write, tokens.cache_write))
        seen.pop(msg_id, None)
        seen[msg_id] = [top.input, top.output, top.cache_read, top.cache_write]
        while len(seen) > MAX_TRACKED_IDS:
            seen.pop(next(iter(seen)))
        return top - prior


class ClaudeParser(UsageParser):
    kind = "claude"

    def parse(self, rec: dict[str, Any]) -> list[UsageRecord]:
        message = rec.get("message")
        if rec.get("type") != "assistant" or not isinstance(message, dict):
            return []
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return []
        tokens = Tokens(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                        _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens")))
        msg_id = str(message.get("id") or rec.get("requestId") or rec.get("uuid") or "")
        delta = self._per_id_delta(msg_id, tokens) if msg_id else tokens
        if not delta.total:
            return []
        return [UsageRecord(delta, str(message.get("model") or ""), _iso_ts(rec.get("timestamp")))]


class CodexParser(UsageParser):
    kind = "codex"

    def reset(self) -> None:
        self.state.pop("total", None)  # the new content's cumulative totals start from zero

    def parse(self, rec: dict[str, Any]) -> list[UsageRecord]:
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            return []
        if rec.get("type") == "turn_context" and payload.get("model"):
            self.state["model"] = str(payload["model"])
            return []
        if rec.get("type") != "event_msg" or payload.get("type") != "token_count":
            return []
        info = payload.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("total_token_usage"), dict):
            return []
        total = info["total_token_usage"]
        cached = _int(total.get("cached_input_tokens"))
        now = Tokens(max(0, _int(total.get("input_tokens")) - cached), _int(total.get("output_tokens")), cached, 0)
        prior = Tokens.from_dict(self.state.get("total"))
        self.state["total"] = now.to_dict()
        delta = now - prior
        if now.total < prior.total:  # a new thread in the same file: its totals start again
            delta = now
        delta = delta.clamp()
        if not delta.total:
            return []
        return [UsageRecord(delta, str(self.state.get("model") or ""), _iso_ts(rec.get("timestamp")))]


class GeminiParser(UsageParser):
    kind = "gemini"

    def parse(self, rec: dict[str, Any]) -> list[UsageRecord]:
        tokens = rec.get("tokens")
        if rec.get("type") != "gemini" or not isinstance(tokens, dict) or not rec.get("id"):
            return []
        cached = _int(tokens.get("cached"))
        # promptTokenCount includes the cached part; thoughts are billed as output.
        value = Tokens(max(0, _int(tokens.get("input")) - cached),
                       _int(tokens.get("output")) + _int(tokens.get("thoughts")), cached, 0)
        delta = self._per_id_delta(str(rec["id"]), value)
        if not delta.total:
            return []
        return [UsageRecord(delta, str(rec.get("model") or ""), _iso_ts(rec.get("timestamp")))]


class OpencodeParser(UsageParser):
    kind = "opencode"

    def parse(self, rec: dict[str, Any]) -> list[UsageRecord]:
        tokens = rec.get("tokens")
        if not isinstance(tokens, dict) or not rec.get("id"):
            return []
        raw_cache = tokens.get("cache")
        cache: dict[str, Any] = raw_cache if isinstance(raw_cache, dict) else {}
        value = Tokens(_int(tokens.get("input")), _int(tokens.get("output")) + _int(tokens.get("reasoning")),
                       _int(cache.get("read")), _int(cache.get("write")))
        msg_id = str(rec["id"])
        delta = self._per_id_delta(msg_id, value)
        costs: dict[str, float] = self.state.setdefault("costs", {})
        cost = rec.get("cost")
        reported = None
        if isinstance(cost, int | float) and cost > 0:
            reported = max(0.0, float(cost) - costs.get(msg_id, 0.0))
            costs[msg_id] = max(float(cost), costs.get(msg_id, 0.0))
            while len(costs) > MAX_TRACKED_IDS:
                costs.pop(next(iter(costs)))
        if not delta.total and not reported:
            return []
        return [UsageRecord(delta, str(rec.get("model") or ""), _iso_ts(rec.get("ts")), reported)]


PARSERS: dict[str, type[UsageParser]] = {p.kind: p for p in (ClaudeParser, CodexParser, GeminiParser, OpencodeParser)}


def parser_for(kind: str, state: Mapping[str, Any] | None = None) -> UsageParser:
    return PARSERS.get(kind, UsageParser)(state)


# -- pricing ---------------------------------------------------------------------------------------------------

PRICING_CHECKED = "2026-11-30"
"""When the shipped prices below were last compared with published list prices (USD, standard tier, no batch or
long-context surcharges): the Claude rows against Anthropic's pricing table (stored copies, as no vendor site is
reachable from where this was written); the OpenAI and Gemini rows are the last known list prices and were not
re-checked that day. Update the date with the prices; users override with `[pricing]`."""


@dataclass(frozen=True)
class Price:
    """Price per million tokens, in the budget's currency (USD for the shipped defaults)."""

    input: float
    output: float
    cache_read: float | None = None  # None: same as input
    cache_write: float | None = None  # None: same as input

    def cost(self, tokens: Tokens) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (tokens.input * self.input + tokens.output * self.output + tokens.cache_read * read
                + tokens.cache_write * write) / 1_000_000


# Matched by the longest prefix of the model name the agent records (so dated snapshots match their family).
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-6": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "o3": Price(2.0, 8.0, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-3-pro": Price(2.0, 12.0, 0.20),
}


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model`: an exact key, else the longest key it starts with (after any `provider/`)."""
    name = model.rsplit("/", 1)[-1].lower()
    if name in prices:
        return prices[name]
    matches = [k for k in prices if name.startswith(k.lower())]
    return prices[max(matches, key=len)] if matches else None


MAX_UNTRUSTED_SHOWN = 20


@dataclass
class Totals:
    """Accumulated usage: tokens, estimated cost, and which models had no price."""

    tokens: Tokens = field(default_factory=Tokens)
    cost: float = 0.0
    models: dict[str, int] = field(default_factory=dict)
    unpriced: set[str] = field(default_factory=set)
    # Why some of it came from records that could not be trusted (`<file>: <what was found>`): the count never
    # went down for them (see sessions/records.py), but what the agent wrote there may be more or less than it spent.
    untrusted: set[str] = field(default_factory=set)

    @property
    def trusted(self) -> bool:
        return not self.untrusted

    def add(self, record: UsageRecord, prices: Mapping[str, Price]) -> None:
        self.tokens = self.tokens + record.tokens
        if record.model:
            self.models[record.model] = self.models.get(record.model, 0) + record.tokens.total
        self.cost += record_cost(record, prices, self.unpriced)

    def merge(self, other: Totals) -> Totals:
        models = dict(self.models)
        for k, v in other.models.items():
            models[k] = models.get(k, 0) + v
        return Totals(self.tokens + other.tokens, self.cost + other.cost, models, self.unpriced | other.unpriced,
                      self.untrusted | other.untrusted)

    @property
    def model(self) -> str:
        return max(self.models, key=lambda m: self.models[m]) if self.models else ""

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens.to_dict(), "cost": round(self.cost, 6), "model": self.model,
                "unpriced_models": sorted(self.unpriced), "trusted": self.trusted,
                "untrusted": sorted(self.untrusted)[:MAX_UNTRUSTED_SHOWN]}


def record_cost(record: UsageRecord, prices: Mapping[str, Price], unpriced: set[str] | None = None) -> float:
    """The agent's own cost figure when it reports one, else tokens times the price of the model."""
    if record.reported_cost is not None:
        return record.reported_cost
    price = price_for(record.model, prices) if record.model else None
    if price is None:
        if unpriced is not None and record.tokens.total:
            unpriced.add(record.model or "?")
        return 0.0
    return price.cost(record.tokens)


def hour_key(ts: float) -> str:
    """The UTC hour a record belongs to (`2026-11-30T10`): usage is kept in hourly buckets for `--since`."""
    return time.strftime("%Y-%m-%dT%H", time.gmtime(ts or time.time()))


def file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size
