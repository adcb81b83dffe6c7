"""User key remapping: config `keys.<binding id> = "key"`, applied with `App.set_keymap`."""

from __future__ import annotations

from collections.abc import Mapping

LEAVE_TERMINAL = "leave_terminal"


def normalize(key: str) -> str:
    """Accept the characters people write (`ctrl+]`, `?`) as well as Textual's key names."""
    names = {"]": "right_square_bracket", "[": "left_square_bracket", "?": "question_mark", "/": "slash"}
    parts = key.split("+")
    parts[-1] = names.get(parts[-1], parts[-1])
    return "+".join(parts)


def user_keymap(keys: Mapping[str, str]) -> dict[str, str]:
    """The config's `keys` table as a Textual keymap (binding id -> comma-separated keys)."""
    return {binding_id: ",".join(normalize(k.strip()) for k in value.split(",")) for binding_id, value in keys.items()}


def leave_keys(keys: Mapping[str, str]) -> set[str]:
    value = keys.get(LEAVE_TERMINAL)
    if not value:
        return {"ctrl+right_square_bracket"}
    return {normalize(k.strip()) for k in value.split(",")}
