"""Bake-offs: several agents on one task, each in its own worktree from the same base; score them, keep the best.

Registry: `.worktrees/bakeoffs.json` (`{"bakeoffs": [record, ...]}`), written atomically under the lock.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core import trust, validate
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.hooks import run_hooks
from daintree_tui.core.index import find
from daintree_tui.core.models import JsonRecord, WorktreeEntry
from daintree_tui.core.runner import run_command
from daintree_tui.core.sandbox import wrap_command
from daintree_tui.core.store import read_json, write_json
from daintree_tui.core.worktrees import WorktreeService

SCORE_RE = re.compile(r"SCORE:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
DEFAULT_SCORE_TIMEOUT = 600.0


def parse_score(output: str) -> float | None:
    """The number after `SCORE:` on the output's last such line."""
    matches = SCORE_RE.findall(output)
    return float(matches[-1]) if matches else None


@dataclass(frozen=True)
class Score:
    """One candidate's judging: the score command's exit and SCORE, the gate (the pre_merge checks: "pass",
    "fail", or None with none configured), the lines its branch changes, and what its agent spent."""

    name: str
    exit_code: int
    wall: float
    score: float | None
    gate: str | None = None
    gate_reason: str | None = None
    diff_lines: int | None = None
    tokens: int | None = None
    cost: float | None = None

    @property
    def out(self) -> bool:
        """A candidate whose score command or checks fail is out of the running."""
        return self.exit_code != 0 or self.gate == "fail"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "exit_code": self.exit_code, "wall": round(self.wall, 3), "score": self.score,
                "gate": self.gate, "gate_reason": self.gate_reason, "diff_lines": self.diff_lines,
                "tokens": self.tokens, "cost": self.cost}

    @classmethod
    def from_dict(cls, data: object) -> Score | None:
        """A saved score (bakeoffs.json is a file anyone could have written), or None when it is not one."""
        if not isinstance(data, dict):
            return None

        def num(key: str, kinds: tuple[type, ...]) -> Any:
            value = data.get(key)
            return value if isinstance(value, kinds) and not isinstance(value, bool) else None

        name, exit_code, wall = data.get("name"), num("exit_code", (int,)), num("wall", (int, float))
        if not isinstance(name, str) or exit_code is None or wall is None:
            return None
        gate = data.get("gate") if data.get("gate") in ("pass", "fail") else None
        reason = data.get("gate_reason") if isinstance(data.get("gate_reason"), str) else None
        score = num("score", (int, float))
        cost = num("cost", (int, float))
        return cls(name, exit_code, float(wall), None if score is None else float(score), gate, reason,
                   num("diff_lines", (int,)), num("tokens", (int,)), None if cost is None else float(cost))


@dataclass(frozen=True, eq=False)
class Bakeoff(JsonRecord):
    """One bake-off: its candidates (one worktree per agent, same base), their scores, the pick. One entry of
    bakeoffs.json; keys appear there as each step adds them (scored_at after scoring, picked_at after the pick)."""

    id: str
    task_id: int
    status: str  # creating, running or picked
    agents: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    base_ref: str = ""
    base_commit: str = ""
    score_command: str | None = None
    created_at: float = 0.0
    scores: tuple[dict[str, Any], ...] = ()
    picked: str | None = None
    later: dict[str, Any] = field(default_factory=dict)  # minimize, scored_at, picked_at, removed, kept

    LATER = ("minimize", "scored_at", "picked_at", "removed", "kept")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bakeoff:
        return cls(id=str(data["id"]), task_id=int(data["task_id"]), status=str(data.get("status", "?")),
                   agents=tuple(data.get("agents", [])), candidates=tuple(data.get("candidates", [])),
                   base_ref=str(data.get("base_ref", "")), base_commit=str(data.get("base_commit", "")),
                   score_command=data.get("score_command"), created_at=float(data.get("created_at", 0.0)),
                   scores=tuple(data.get("scores", [])), picked=data.get("picked"),
                   later={k: data[k] for k in cls.LATER if k in data})

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "task_id": self.task_id, "agents": list(self.agents),
                "candidates": list(self.candidates), "base_ref": self.base_ref, "base_commit": self.base_commit,
                "score_command": self.score_command, "status": self.status, "created_at": self.created_at,
                "scores": list(self.scores), "picked": self.picked, **self.later}

    @property
    def number(self) -> int:
        return int(self.id[1:])


def rank(scores: list[Score], minimize: bool = False) -> list[Score]:
    """Candidates still in the running first, by score (higher wins, or lower with `minimize`; without a SCORE
    line, by wall time, lower wins), a tie going to the smaller diff, then the lower cost; candidates that are
    out (their score command or their checks failed) last."""

    def key(s: Score) -> tuple[int, float, int, float]:
        if s.out:
            return (2, s.wall, 0, 0.0)
        first = s.wall if s.score is None else (s.score if minimize else -s.score)
        return (0 if s.score is not None else 1, first, s.diff_lines or 0, s.cost or 0.0)

    return sorted(scores, key=key)


class BakeoffService:
    """The bake-off registry and scoring; creating and picking are operations (`ops.bakeoff`, in
    services/operations/bakeoff.py): they make and remove worktrees and start sessions."""

    def __init__(self, worktrees: WorktreeService,
                 usage: Callable[[Sequence[str]], Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        """`usage`: tokens and cost of each named worktree's session (`SessionManager.usage_summary`), for the
        scoreboard's cost column."""
        self.worktrees = worktrees
        self.project = worktrees.project
        self.tasks = worktrees.tasks
        self.usage = usage

    @property
    def path(self) -> Path:
        return self.project.state_dir / "bakeoffs.json"

    def _load(self) -> list[Bakeoff]:
        data, _ = read_json(self.path, "bake-off registry")
        raw = data.get("bakeoffs", []) if isinstance(data, dict) else []
        valid = validate.valid_records(raw if isinstance(raw, list) else [], validate.bakeoff_problem,
                                       f"bake-off in {self.path}")
        return [Bakeoff.from_dict(r) for r in valid]

    def _save(self, records: list[Bakeoff]) -> None:
        write_json(self.path, {"bakeoffs": [r.to_dict() for r in records]})

    def records(self) -> list[Bakeoff]:
        return self._load()

    def get(self, bakeoff_id: str) -> Bakeoff:
        for record in self._load():
            if record.id == bakeoff_id:
                return record
        raise InputError(f"no bake-off with id {bakeoff_id!r}")

    def update(self, record: Bakeoff) -> None:
        """Write `record` over the one with its id (or add it)."""
        with self.project.lock.hold():
            records = [r for r in self._load() if r.id != record.id] + [record]
            self._save(sorted(records, key=lambda r: r.number))

    def reserve(self, task_id: int) -> str:
        """A new bake-off's id, taken under the lock by a record in state `creating` (two creates never share one)."""
        with self.project.lock.hold():
            records = self._load()
            bakeoff_id = f"b{max((r.number for r in records), default=0) + 1}"
            self._save([*records, Bakeoff(bakeoff_id, task_id, "creating")])
        return bakeoff_id

    def forget(self, bakeoff_id: str) -> None:
        """Drop a bake-off whose create failed (its candidates were removed)."""
        with self.project.lock.hold():
            self._save([r for r in self._load() if r.id != bakeoff_id])

    def tag(self, name: str, bakeoff_id: str) -> None:
        """Mark candidate `name`'s index entry as part of bake-off `bakeoff_id`."""
        with self.project.lock.hold():
            entries = self.worktrees.index.load(heal=True)
            entry = find(entries, name)
            if entry is not None:
                entry.extra["bakeoff"] = bakeoff_id
                self.worktrees.index.save(entries)

    def score(self, bakeoff_id: str, command: str | None = None, minimize: bool = False,
              timeout: float = DEFAULT_SCORE_TIMEOUT) -> list[Score]:
        """Run the score command in every live candidate at once; rank them."""
        timeout = validate.finite_seconds(timeout)
        record = self.get(bakeoff_id)
        if command is None and record.score_command:
            command = str(record.score_command)
            # The record is a file in the repository: its command runs only if this user gave it (at create).
            if not trust.command_remembered(self.project, command):
                raise OperationError(f"bake-off {bakeoff_id}: its score command {command!r} was not given by you "
                                     "here; pass it again with --score")
        elif command is None:
            trust.require_trusted(self.project.config, "bakeoff.score")
            command = self.project.config.bakeoff_score
        if not command:
            raise InputError("no score command: give one when creating the bake-off (--score CMD; in the dashboard, "
                             "the Score field) or set bakeoff.score in config")
        entries = {e.name: e for e in self.worktrees.entries()}
        live = [n for n in record.candidates if n in entries and Path(entries[n].path).is_dir()]
        if not live:
            raise OperationError(f"bake-off {bakeoff_id} has no live candidates left")

        # The command runs the candidates' own code (their tests, their scripts): confined to each worktree like
        # a hook or `worktree run`, never with the user's (or, through MCP, a lead's) full access. Chosen here,
        # before the worker threads: a sandboxed caller's request must be refused rather than run unconfined.
        runs: dict[str, tuple[list[str], dict[str, str]]] = {}
        for name in live:
            env = worktree_env(self.project, entries[name])
            runs[name] = (wrap_command(self.project, entries[name], ["sh", "-c", command], env), env)
        # The gate runs the checks through run_hooks, which chooses its sandbox as it goes: in the context of this
        # call (a sandboxed caller's request refuses what would run unconfined), one copy per thread.
        contexts = {name: contextvars.copy_context() for name in live}
        usage = self.usage(live) if self.usage is not None else {}

        def one(name: str) -> Score:
            argv, env = runs[name]
            result = run_command(argv, Path(entries[name].path), env, timeout)
            gate, reason = contexts[name].run(self._gate, entries[name])
            spent = usage.get(name) or {}
            tokens = (spent.get("tokens") or {}).get("total") if isinstance(spent.get("tokens"), dict) else None
            return Score(name, result.exit_code, result.duration, parse_score(result.stdout + "\n" + result.stderr),
                         gate, reason, self._diff_lines(record.base_commit, entries[name].branch),
                         tokens if isinstance(tokens, int) else None,
                         spent.get("cost") if isinstance(spent.get("cost"), int | float) else None)

        with ThreadPoolExecutor(max_workers=len(live)) as pool:
            scores = rank(list(pool.map(one, live)), minimize)
        record = replace(record, scores=tuple(s.to_dict() for s in scores),
                         later={**record.later, "minimize": minimize, "scored_at": time.time()})
        self.update(record)
        self.project.events.append("bakeoff.scored", bakeoff=bakeoff_id, scores=list(record.scores))
        return scores

    def _gate(self, entry: WorktreeEntry) -> tuple[str | None, str | None]:
        """The candidate's pre_merge checks, in its sandbox, as a merge runs them: ("pass" | "fail", why) or
        (None, None) with none configured. Checks that cannot run for want of trust fail (closed, as a merge's)."""
        if not self.project.config.hooks.get("pre_merge"):
            return None, None
        try:
            run_hooks(self.project, "pre_merge", entry)
        except OperationError as exc:
            return "fail", str(exc)
        return "pass", None

    def _diff_lines(self, base: str, branch: str) -> int | None:
        """Lines added and removed by the candidate's branch since the common base: what its pick would merge
        (outside, on objects only)."""
        proc = g.git(self.project.root, "diff", "--numstat", "--no-renames", "--no-ext-diff", "--no-textconv",
                     base, branch, "--", check=False)
        if proc.returncode != 0:
            return None
        total = 0
        for line in proc.stdout.splitlines():
            added, _, rest = line.partition("\t")
            removed = rest.partition("\t")[0]
            if added.isdigit() and removed.isdigit():  # a binary file says "-"
                total += int(added) + int(removed)
        return total

    def best(self, bakeoff_id: str) -> str:
        """The winner of the last scoring: the first of the ranking that is still in the running.

        Raises:
            OperationError: not scored yet, or every candidate is out.
        """
        record = self.get(bakeoff_id)
        scores = [s for s in map(Score.from_dict, record.scores) if s is not None and s.name in record.candidates]
        if not scores:
            raise OperationError(f"bake-off {bakeoff_id} has not been scored yet: run `daintree bakeoff score "
                                 f"{bakeoff_id}` first")
        ranked = rank(scores, bool(record.later.get("minimize") is True))
        if ranked[0].out:
            raise OperationError(f"bake-off {bakeoff_id}: every candidate is out (its score command or its checks "
                                 "failed): nothing to keep")
        return ranked[0].name
