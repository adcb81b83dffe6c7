"""What a starting agent is given besides its command: the `daintree mcp` server its role asks for (wired in
files of its TMPDIR, made new), and, for an agent that takes its first prompt typed, that prompt as one bracketed
paste once the agent reads input."""

from __future__ import annotations

import os
import time
from pathlib import Path

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.core.spawn import python_module
from daintree_tui.core.store import create_new
from daintree_tui.sessions.host import SessionHost
from daintree_tui.sessions.keys import paste_text
from daintree_tui.sessions.presets import Preset, session_mcp_wiring, unwire_mcp


def wire_mcp(project: Project, name: str, preset: Preset, role: str | None, argv: list[str],
             env: dict[str, str]) -> list[str]:
    """Carry `daintree mcp` into the agent when the session's role asks for it (files in its TMPDIR)."""
    unwire_mcp(env)
    server = [*python_module("daintree_tui"), "mcp", "--repo", str(project.root), "--worktree", name]
    wiring = session_mcp_wiring(project.config, preset, role, server, project.tmpdir_for(name), env)
    if wiring is None:
        return argv
    for path, text in wiring.files.items():
        # The TMPDIR is the agent's to write: whatever it left at this name (a link to ~/.bashrc) goes, and
        # the file is made new, never opened through a link.
        with suppressed(FileNotFoundError):
            os.unlink(path)
        try:
            create_new(Path(path), text)
        except OSError as exc:
            raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None
    env.update(wiring.env)
    own = len(preset.argv())
    return [*argv[:own], *wiring.args, *argv[own:]]


def type_first_prompt(host: SessionHost, name: str, prompt: str, log: Path, wait: float = 10.0,
                      offset: int = 0) -> None:
    """Give a `type` agent its first prompt as one bracketed paste (ESC[200~ ... ESC[201~, sent as such, not
    left to whether the pane asked for it yet): a multi-line prompt arrives as one piece of text, never as
    lines to run. Sent once the agent has drawn something past `offset` of its log (where this run's output
    starts: the log keeps every run's, and a restarted agent got its prompt before it read input, which a raw
    terminal's set-up then flushed), or after `wait`."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with suppressed(OSError):
            if log.stat().st_size > offset:
                break
        time.sleep(0.05)
    text = paste_text(prompt)  # the text cannot close the paste early
    host.send_text(name, f"\x1b[200~{text}\x1b[201~", enter=True)
