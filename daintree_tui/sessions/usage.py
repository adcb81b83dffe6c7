"""Token usage from the agents' own records: one parser per agent turns a record line into the tokens it adds.

The parts: reading a record file from its tail (sessions/usage_tail.py: never through a link, never without end),
tokens, prices and totals (sessions/usage_cost.py), and here the parsers. All pure: no project, no tmux.

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

import json
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from daintree_tui.sessions.usage_cost import (
    DEFAULT_PRICES,
    PRICING_CHECKED,
    Price,
    Tokens,
    Totals,
    UsageRecord,
    price_for,
    record_cost,
)
from daintree_tui.sessions.usage_tail import MAX_LINE, MAX_RECORD_BYTES, TailState, open_record, read_new_lines

# The face of usage: the tail reader's and the cost's names are imported from here by the services and the tests.
__all__ = ["DEFAULT_PRICES", "MAX_LINE", "MAX_RECORD_BYTES", "PARSERS", "PRICING_CHECKED", "ClaudeParser",
           "CodexParser", "GeminiParser", "OpencodeParser", "Price", "TailState", "Tokens", "Totals", "UsageParser",
           "UsageRecord", "hour_key", "open_record", "parser_for", "price_for", "read_new_lines", "record_cost"]

MAX_TRACKED_IDS = 2000  # message ids remembered for deduplication (old ones never grow again)

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


def hour_key(ts: float) -> str:
    """The UTC hour a record belongs to (`2026-11-30T10`): usage is kept in hourly buckets for `--since`."""
    return time.strftime("%Y-%m-%dT%H", time.gmtime(ts or time.time()))
