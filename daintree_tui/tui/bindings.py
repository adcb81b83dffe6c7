"""The dashboard's keys: one table of `Binding`s that the footer, the help screen and the command palette read.

Every binding has an id (users remap by id: config `keys.<id>`), a short description (footer, palette title) and a
tooltip (help text, palette help). An action that acts on the current worktree is marked with `@needs_worktree`,
which is how `check_action`, the palette and the help know it: nothing repeats the list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from textual.binding import Binding, BindingType

F = TypeVar("F", bound=Callable[..., Any])

JUMP = Binding.Group("Jump to session N")
"""alt+N and the digits share one help row."""


def needs_worktree(action: F) -> F:
    """Mark an `action_*` method as one that acts on the current worktree (disabled when there is none)."""
    action.needs_worktree = True  # type: ignore[attr-defined]
    return action


def acts_on_worktree(node: object, action: str) -> bool:
    method = getattr(node, f"action_{action.split('(')[0]}", None)
    return bool(getattr(method, "needs_worktree", False))


DASHBOARD_BINDINGS: list[BindingType] = [
    Binding("n", "new_task", "New", id="new_task",
            tooltip="New task (enter in the subject: task + worktree + session at once)"),
    Binding("enter", "open_session", "Open", id="open_session",
            tooltip="Type into the current worktree's session (starting its agent if none runs)"),
    Binding("s", "start_session", "Session", id="start_session",
            tooltip="Start or restart a session with a chosen agent"),
    Binding("S", "stop_session", "Stop", id="stop_session", show=False,
            tooltip="Stop the agent (asks; the worktree and its files stay, enter starts it again)"),
    Binding("k", "keep", "Keep", id="keep", tooltip="Keep the worktree (asks: keeping cannot be undone)"),
    Binding("x", "remove", "Remove", id="remove", tooltip="Remove the worktree (asks; discarding work asks twice)"),
    Binding("d", "diff", "Diff", id="diff", tooltip="Diff against the base"),
    Binding("D", "full_diff", "Full diff", id="full_diff", show=False,
            tooltip="The diff full screen (D or esc to come back)"),
    Binding("r", "review_comment", "Comment", id="review_comment", show=False,
            tooltip="Comment on the diff's line under its cursor (up and down move it): file and new-side line"),
    Binding("R", "review_send", "Send review", id="review_send", show=False,
            tooltip="Send every unsent comment to the agent as one paste, each with its line (starts it if none "
                    "runs)"),
    Binding("z", "zoom", "Zoom", id="zoom", show=False,
            tooltip="Zoom the terminal to the whole window (ctrl+] comes back; esc is the agent's key)"),
    Binding("h", "checkpoints", "Checkpoints", id="checkpoints", show=False,
            tooltip="The worktree's checkpoints: a timeline of its agent's turns with each step's diff, and a "
                    "restore of one (asks)"),
    Binding("C", "commit", "Commit", id="commit", show=False, tooltip="Commit the agent's work"),
    Binding("m", "merge", "Merge", id="merge",
            tooltip="Merge back (ff, squash or rebase; pre_merge hooks first)"),
    Binding("p", "pr", "PR", id="pr", show=False, tooltip="Push and open a pull request (gh)"),
    Binding("P", "review_send_ci", "Send CI", id="review_send_ci", show=False,
            tooltip="Send the pull request's failed CI checks, each with the end of its log, to the agent"),
    Binding("i", "inject_task", "Send task", id="inject_task", show=False,
            tooltip="Paste the task's text into the session"),
    Binding("c", "copy_path", "Copy path", id="copy_path", show=False, tooltip="Copy the worktree's path"),
    Binding("u", "copy_link", "Copy link", id="copy_link", show=False,
            tooltip="Copy the link the agent shows (a sign-in URL), whole"),
    Binding("e", "events", "Events", id="events", show=False, tooltip="The events log"),
    Binding("slash", "filter", "Filter", id="filter",
            tooltip="Filter tasks and worktrees; host:NAME shows one host's (esc clears)"),
    Binding("left_square_bracket", "cycle_session(-1)", "Prev session", id="prev_session", show=False,
            tooltip="Previous session (focus stays in the lists)"),
    Binding("right_square_bracket", "cycle_session(1)", "Next session", id="next_session", show=False,
            tooltip="Next session (focus stays in the lists)"),
    *[Binding(f"{n},alt+{n}", f"jump_session({n})", f"Session {n}", id=f"jump_session_{n}", show=False,
              group=JUMP, tooltip="Jump to session N: digits in the lists (work inside tmux), or alt+N")
      for n in range(1, 10)],
    Binding("b", "bakeoff", "Bake-off", id="bakeoff", show=False,
            tooltip="Bake-off: several agents on the current worktree's task (in the tasks list: the task "
                    "under the cursor)"),
    Binding("t", "train", "Train", id="train", show=False,
            tooltip="Merge train: land the current or every finished worktree one by one, each tested first"),
    Binding("a", "toggle_auto", "Auto", id="auto_queue", show=False,
            tooltip="Auto queue: start ready tasks by themselves (max_sessions at a time)"),
    Binding("question_mark", "help", "Help", id="help", tooltip="This help"),
    Binding("q", "quit_dashboard", "Quit", id="quit",
            tooltip="Quit (agents keep running; a demo's agents stop with it)"),
]


DIFF_BINDINGS: list[BindingType] = [
    Binding("up", "cursor(-1)", "Line up", id="diff_cursor_up", show=False, tooltip="The diff's cursor up a line"),
    Binding("down", "cursor(1)", "Line down", id="diff_cursor_down", show=False,
            tooltip="The diff's cursor down a line"),
]
"""The diff view's own keys (while it has focus): the line a comment (`r`) goes on."""


@dataclass(frozen=True)
class KeyRow:
    """One line of help: the keys (as the user has them), the action and what it does."""

    keys: str
    action: str
    description: str
    help: str
    needs_worktree: bool
    binding_id: str = ""


def key_rows(bindings: Iterable[BindingType], keymap: Mapping[str, str], node: object,
             display: Callable[[Binding], str]) -> list[KeyRow]:
    """Help rows from bindings, one per id (or per group), with the user's keymap applied."""
    rows: list[KeyRow] = []
    grouped: dict[object, int] = {}
    seen: set[str] = set()
    # The texts name the leave key as shipped; with it remapped, "ctrl+] comes back" sent the user's ctrl+] to
    # the agent instead.
    leave = keymap.get("leave_terminal")

    def said(text: str) -> str:
        return text.replace("ctrl+]", readable_key(leave.split(",")[0].strip())) if leave else text

    for binding in bindings:
        if not isinstance(binding, Binding):
            continue
        binding_id = binding.id or binding.action
        if binding_id in seen:
            continue
        seen.add(binding_id)
        keys = keymap.get(binding_id, binding.key)
        shown = ", ".join(display(b) for b in Binding.make_bindings([Binding(keys, binding.action)]))
        if binding.group is not None:
            if binding.group in grouped:
                continue
            grouped[binding.group] = len(rows)
            first = binding.key.split(",")
            shown = ", ".join(f"{k[:-1]}1..9" if k[-1].isdigit() else k for k in first)
            rows.append(KeyRow(shown, binding.action, binding.group.description, said(binding.tooltip), False,
                               binding_id))
            continue
        rows.append(KeyRow(shown, binding.action, binding.description, said(binding.tooltip or binding.description),
                           acts_on_worktree(node, binding.action), binding_id))
    return rows


_KEY_CHARACTERS = {"left_square_bracket": "[", "right_square_bracket": "]", "question_mark": "?", "slash": "/"}


def readable_key(key: str) -> str:
    """`ctrl+right_square_bracket` as people write it: `ctrl+]`."""
    *mods, last = key.split("+")
    return "+".join([*mods, _KEY_CHARACTERS.get(last, last)])


def markdown_key_table(rows: Iterable[KeyRow]) -> list[str]:
    """The README's key table: key, binding id (what `keys.<id>` remaps), what it does."""
    lines = ["| key | id | action |", "|---|---|---|"]
    for row in rows:
        keys = ", ".join(f"`{readable_key(k.strip())}`" for k in row.keys.split(","))
        binding_id = "jump_session_1..9" if row.action.startswith("jump_session") else row.binding_id
        lines.append(f"| {keys} | `{binding_id}` | {row.help} |")
    return lines
