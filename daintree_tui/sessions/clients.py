"""Which sessions a person is typing into: the tmux clients attached to them and when each last had a key.

tmux updates a client's `client_activity` on input only (output to the client leaves it alone), and when the
client attaches: a client whose activity is still its attach time (`client_created`) has had no key. The
dashboard attaches one to the session you select, so counting the attach as a key held back the first `waiting`
of every session started from the dashboard, or just looked at, for 30 s ("not sent: you are typing into it").
Every way a person reaches a session is such a client: the dashboard's embedded terminal, the browser's
(`daintree serve` runs the same dashboard), and a plain `tmux attach` from another terminal. Control-mode clients
(the dashboard's event stream) type nothing and are left out.
"""

from __future__ import annotations

import time

from daintree_tui.sessions.host import worktree_of_session

TYPING_WINDOW = 30.0  # seconds since a key: that person is at that session now, and needs no notice about it


def typed_into(host: object, within: float = TYPING_WINDOW, now: float | None = None) -> set[str]:
    """The worktrees whose session a non-control client attached to has had a key in the last `within` seconds
    (none when the host is not tmux or its server does not answer)."""
    run = getattr(host, "tmux", None)
    if run is None:
        return set()
    proc = run("list-clients", "-F", "#{client_session}\t#{client_activity}\t#{client_control_mode}\t#{client_created}",
               check=False)
    if getattr(proc, "returncode", 1) != 0:
        return set()
    now = time.time() if now is None else now
    found = set()
    for line in str(getattr(proc, "stdout", "")).splitlines():
        session, _, rest = line.partition("\t")
        activity, _, rest = rest.partition("\t")
        control, _, created = rest.partition("\t")
        worktree = worktree_of_session(session)
        if worktree is None or control.strip() == "1" or not activity.isdigit():
            continue
        if created.strip().isdigit() and int(activity) <= int(created):
            continue  # attached (the dashboard showing it), no key since: nobody is typing there
        if now - int(activity) <= within:  # a whole second: the key may have come just before it ended
            found.add(worktree)
    return found
