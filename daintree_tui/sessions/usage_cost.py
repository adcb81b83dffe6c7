"""Tokens and what they cost: the token counts a usage record adds, the prices of the models (shipped defaults,
overridden by `[pricing]`), and the totals of a run with its estimated cost.

Pure: no project, no files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
