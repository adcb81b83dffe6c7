"""User key remapping: config `keys.<binding id> = "key"`, applied with `App.set_keymap`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from textual.binding import Binding, BindingType

from daintree_tui.core.log import warn
from daintree_tui.tui.bindings import DASHBOARD_BINDINGS, readable_key

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


def unknown_ids(keymap: Mapping[str, str], bindings: Iterable[BindingType]) -> list[str]:
    """The ids the user remapped that no binding has (a typo in `keys.<id>` would remap nothing, silently)."""
    known = {b.id for b in bindings if isinstance(b, Binding) and b.id} | {LEAVE_TERMINAL}
    return sorted(set(keymap) - known)


def warn_unknown_ids(keymap: Mapping[str, str], bindings: Iterable[BindingType]) -> None:
    """Warn (a toast) of `keys.<id>` entries that remap nothing, of `bindings` and every dialog's (it imports the
    dialogs: run it off the event loop)."""
    unknown = unknown_ids(keymap, [*bindings, *dialog_bindings()])
    if unknown:
        warn(f"config: {', '.join(f'keys.{i}' for i in unknown)} remaps nothing: no key has that id "
             "(the README's key table lists them)")


def dialog_bindings() -> list[BindingType]:
    """The bindings of every screen the dashboard may open (their modules are imported: not a start-up call)."""
    import importlib
    import pkgutil

    from daintree_tui.tui import screens

    found: list[BindingType] = []
    for module_info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                found.extend(getattr(value, "BINDINGS", ()))
    return found


def shown_leave_key(keys: Mapping[str, str]) -> str:
    """The leave key as the user set it, for text on screen (`ctrl+]` unless remapped)."""
    first = (keys.get(LEAVE_TERMINAL) or "ctrl+]").split(",")[0].strip()
    return readable_key(normalize(first))


def shown_key(keys: Mapping[str, str], binding_id: str) -> str:
    """The dashboard's key for `binding_id` as the user set it, for text on screen (`C` for commit unless
    remapped)."""
    default = next(b.key for b in DASHBOARD_BINDINGS if isinstance(b, Binding) and b.id == binding_id)
    first = (keys.get(binding_id) or default).split(",")[0].strip()
    return readable_key(normalize(first))
