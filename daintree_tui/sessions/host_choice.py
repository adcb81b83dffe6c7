"""The choice of a project's session host: tmux when installed, else one in-process PTY host per project.

Apart from sessions/host.py (the interface every host implements), so that the hosts import the interface and
only this module imports the hosts.
"""

from __future__ import annotations

from pathlib import Path

from daintree_tui.core.project import Project
from daintree_tui.sessions.host import SessionHost, tmux_available
from daintree_tui.sessions.tmux import TmuxHost

_pty_hosts: dict[Path, SessionHost] = {}


def host_for(project: Project, create: bool = True) -> SessionHost | None:
    """The host for a project: tmux when installed, else one in-process PTY host per project.

    Args:
        create: make a PTY host when tmux is absent (the dashboard does; the CLI, whose sessions would die
            with it, does not).
    """
    if tmux_available():
        return TmuxHost(project)
    if project.root in _pty_hosts:
        return _pty_hosts[project.root]
    if not create:
        return None
    # Here, not at the top: the PTY host brings the terminal emulator (pyte), which a machine with tmux never needs.
    from daintree_tui.sessions.pty_host import PtyHost

    host = PtyHost(project)
    _pty_hosts[project.root] = host
    return host
