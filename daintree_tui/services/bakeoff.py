"""Bake-offs: several agents on one task, each in its own worktree from the same base; score them, keep the best.

Registry: `.worktrees/bakeoffs.json` (`{"bakeoffs": [record, ...]}`), written atomically under the lock.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import trust, validate
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import find
from daintree_tui.core.models import JsonRecord
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
    name: str
    exit_code: int
    wall: float
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "exit_code": self.exit_code, "wall": round(self.wall, 3), "score": self.score}


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
    """Passing candidates first, by score (higher wins, or lower with `minimize`; without a SCORE line, by wall
    time, lower wins); failing candidates last."""

    def key(s: Score) -> tuple[int, int, float]:
        if s.exit_code != 0:
            return (2, 0, s.wall)
        if s.score is None:
            return (1, 0, s.wall)
        return (0, 0, s.score if minimize else -s.score)

    return sorted(scores, key=key)


class BakeoffService:
    """The bake-off registry and scoring; creating and picking are operations (`services.operations`): they make
    and remove worktrees and start sessions."""

    def __init__(self, worktrees: WorktreeService) -> None:
        self.worktrees = worktrees
        self.project = worktrees.project
        self.tasks = worktrees.tasks

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

        def one(name: str) -> Score:
            argv, env = runs[name]
            result = run_command(argv, Path(entries[name].path), env, timeout)
            return Score(name, result.exit_code, result.duration, parse_score(result.stdout + "\n" + result.stderr))

        with ThreadPoolExecutor(max_workers=len(live)) as pool:
            scores = rank(list(pool.map(one, live)), minimize)
        record = replace(record, scores=tuple(s.to_dict() for s in scores),
                         later={**record.later, "minimize": minimize, "scored_at": time.time()})
        self.update(record)
        self.project.events.append("bakeoff.scored", bakeoff=bakeoff_id, scores=list(record.scores))
        return scores
