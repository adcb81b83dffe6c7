"""daintree-tui: parallel AI coding agents, each in its own git worktree."""

__version__ = "0.1.0"
