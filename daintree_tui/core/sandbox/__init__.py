"""The sandbox every session, hook and `worktree run` runs in (docs/design.md 2a, rule 8).

Where bubblewrap works, a command sees the whole filesystem read-only except what it was given: its worktree,
what git needs to commit on its own branch, its TMPDIR (also at /tmp), its agent's own state folders and its
session inbox. In core because hooks and `run` need it and core cannot import sessions; the session-specific
parts (agent folders, the inbox) are added by `sessions.sandbox`. By job:

- `spec`: what one command may write (`SandboxSpec`), and the `Sandbox` protocol a backend implements;
- `policy`: which sandbox a command gets, by config (`choose`); reads config and trust, runs no git;
- `backends`: bubblewrap and none; `mount_table`: the mount table as bwrap's arguments;
- `git_guards`: what keeps an agent's git inside (read-only pointers, the quarantine) and brings in what it wrote;
- `hidden`: sockets, credentials and secrets no sandbox sees; `commands`: one worktree's command confined.

The names other modules use are re-exported here.
"""

from __future__ import annotations

from daintree_tui.core.mounts import INBOX_MOUNT
from daintree_tui.core.sandbox.backends import BwrapSandbox, NoSandbox, probe_argv
from daintree_tui.core.sandbox.commands import INBOX_ENV, OWN_SOURCE, program_dirs, spec_for, wrap_command
from daintree_tui.core.sandbox.git_guards import AGENT_GIT_DIR, agent_git_of, bring_in
from daintree_tui.core.sandbox.hidden import SSH_CONTROL_DIR_ENV, secrets_dir, ssh_control_dir
from daintree_tui.core.sandbox.mount_table import KERNEL_MASKED, KERNEL_READ_ONLY
from daintree_tui.core.sandbox.policy import Choice, choose, on_behalf_of_sandboxed, sandboxed_caller, writable_paths
from daintree_tui.core.sandbox.spec import Sandbox, SandboxSpec

__all__ = ["AGENT_GIT_DIR", "INBOX_ENV", "INBOX_MOUNT", "KERNEL_MASKED", "KERNEL_READ_ONLY", "OWN_SOURCE",
           "SSH_CONTROL_DIR_ENV", "BwrapSandbox", "Choice", "NoSandbox", "Sandbox", "SandboxSpec", "agent_git_of",
           "bring_in", "choose", "on_behalf_of_sandboxed", "probe_argv", "program_dirs", "sandboxed_caller",
           "secrets_dir", "spec_for", "ssh_control_dir", "wrap_command", "writable_paths"]
