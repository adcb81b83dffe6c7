"""What a session's pane shows beyond tmux's own pane state, read from its log and its agent's records: the screen
(captured only when the log grew), whether the current run has drawn anything (read once per run), and the
`Observation` that its status is derived from.

Caches of what was read, no more: the log file and tmux are the truth, and nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from daintree_tui.core.project import Project
from daintree_tui.sessions.host import PaneState, SessionHost
from daintree_tui.sessions.last_words import drew_since
from daintree_tui.sessions.records import UsageTracker
from daintree_tui.sessions.status import Observation


class PaneFacts:
    """The facts the sessions of one project show, cached by log file."""

    def __init__(self, project: Project, usage: UsageTracker) -> None:
        self.project = project
        self.usage = usage
        self._screen_cache: dict[str, tuple[float | None, str]] = {}
        self._drawn: set[tuple[str, float]] = set()  # runs (worktree, start) seen drawing: no need to look again

    def screens(self, host: SessionHost, names: Sequence[str]) -> dict[str, str]:
        """The plain-text screens of these sessions. Only those whose log grew since the last look are captured
        (in one tmux call for all): an idle session costs a stat, not a capture."""
        stale = []
        for name in names:
            mtime = self._log_mtime(name)
            cached = self._screen_cache.get(name)
            if cached is None or cached[0] != mtime:
                stale.append(name)
        if stale:
            capture_all = getattr(host, "capture_all", None)
            fresh = capture_all(stale, ansi=False) if capture_all is not None else {
                n: host.capture(n) for n in stale}
            for name in stale:
                self._screen_cache[name] = (self._log_mtime(name), fresh.get(name, ""))
        return {n: self._screen_cache[n][1] for n in names if n in self._screen_cache}

    def _log_mtime(self, name: str) -> float | None:
        try:
            return self.project.log_path(name).stat().st_mtime
        except OSError:
            return None

    def observation(self, state: PaneState, meta: dict[str, Any], screen: str | None) -> Observation:
        """What status is derived from: the pane's state, its log's last output, the agent's own signal."""
        log = self.project.log_path(state.worktree)
        try:
            st = log.stat()
            last_output = st.st_mtime if st.st_size else None
        except OSError:
            last_output = None
        signal = meta.get("signal") or {}
        hooks = meta.get("status_source") == "hooks"
        record_mtime = self.usage.record_mtime(state.worktree) if hooks and signal else None
        started_at = float(meta.get("started_at") or state.created)
        return Observation(alive=not state.dead, exit_code=state.exit_code,
                           started_at=started_at, last_output=last_output,
                           signal_state=signal.get("state"), signal_ts=signal.get("ts"), screen_tail=screen,
                           hooks=hooks, record_mtime=record_mtime,
                           drawn=None if state.dead else self.drawn(state.worktree, meta, started_at))

    def drawn(self, name: str, meta: Mapping[str, Any], started_at: float) -> bool | None:
        """Whether the session's current run has drawn anything visible (its log since the run's `log_offset`);
        None for a run recorded without one. Once drawn, a run is not read again."""
        offset = meta.get("log_offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            return None
        run = (name, started_at)
        if run in self._drawn:
            return True
        drawn = drew_since(self.project.log_path(name), offset)
        if drawn:
            self._drawn.add(run)
        return drawn
