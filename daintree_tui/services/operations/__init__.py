"""Operations: each thing a person (or a lead agent) asks daintree to do, put together once.

The CLI, the dashboard, the queue, the bake-off, the MCP tools and a sandboxed session's inbox call these, and
none of them composes a worktree, a session, a merge or a remove out of the building blocks below, nor runs the
checks that go with one (tests/test_layers.py holds them to it, for every module of this package). So every
interface refuses the same things: an agent whose command the repository's untrusted `.daintree.toml` sets
(docs/design.md 2a), an agent that is not installed, a first prompt for an agent that takes none, a session name
another repository holds on a shared tmux server, a forced remove asked for from inside a sandbox. Each operation
checks all it can before its first step, so a refused operation leaves no task, worktree, branch or session
behind, and returns a result its caller shapes into its own words (`--json`, a notification, an MCP tool's answer).

`Services.ops` is the one entry point. It holds the checks and the worktree and session operations itself
(core.py), and one part per other job, each a module of this package:

- `ops.landing` (landing.py): commit, pull request, merge, the merge train, the radar's predicted conflicts;
- `ops.review` (review.py): the approval gate a role asks of a merge, the pull request's CI checks, the review
  loop (comments, sending them, verdicts);
- `ops.checkpoints` (checkpoints.py): listing, taking, diffing and restoring a worktree's checkpoints;
- `ops.bakeoff` (bakeoff.py): creating a bake-off and picking its winner.

A part reaches the checks and the other parts through the `Operations` it belongs to, never around it.
"""

from daintree_tui.services.operations.checkpoints import CheckpointDiff
from daintree_tui.services.operations.core import Created, Operations, Queued

__all__ = ["CheckpointDiff", "Created", "Operations", "Queued"]
