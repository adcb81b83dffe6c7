"""Session hosts (tmux, plain-PTY fallback), agent presets, status, terminal emulation. Imports no textual."""
