"""The trust record: which bytes of which repository's `.daintree.toml` the user trusted (docs/design.md 2a), kept in
the user's data dir (path and sha256 in `trust.json`, a copy of the bytes beside it). A later change of the file
needs trust again. What the record allows to run is `trust`.
"""

from __future__ import annotations

from pathlib import Path

from daintree_tui.core.config_model import REPO_CONFIG_NAME
from daintree_tui.core.store import StateLock, read_json
from daintree_tui.core.user_dirs import user_data_dir


def trust_file() -> Path:
    return user_data_dir() / "trust.json"


def trust_lock() -> StateLock:
    """Around every read-modify-write of `trust.json`: two `daintree trust` at once (two repositories) each
    rewrote the whole record from what it had read, and one repository's trust was lost, said done."""
    return StateLock(user_data_dir() / "trust.lock")


def file_sha256(path: Path) -> str:
    import hashlib  # only trust checks hash (most commands of a repo without hooks never do)

    return hashlib.sha256(path.read_bytes()).hexdigest()


def trust_key(config_path: Path) -> str:
    """Where a trusted config lies: its folder resolved, the file itself not followed. A clone's
    `.daintree.toml -> ~/src/mine/.daintree.toml` resolved to a file the user trusted, so that the clone's hooks
    (`./setup.sh`: the clone's own script) ran, untrusted, with the trust of another repository."""
    return str(config_path.parent.resolve() / config_path.name)


def is_trusted(config_path: Path) -> bool:
    """Whether the user trusted exactly these bytes of this file (a later change needs trust again)."""
    data, _ = read_json(trust_file(), "trust record")
    if not isinstance(data, dict):
        return False
    try:
        return data.get(trust_key(config_path)) == file_sha256(config_path)
    except OSError:
        return False


def trusted_copy(config_path: Path) -> Path:
    """Where the bytes the user trusted of this file are kept (beside the trust record, in the user's data dir):
    what `daintree trust --show` compares the file with once it has changed."""
    import hashlib  # here, as above

    return user_data_dir() / "trusted" / f"{hashlib.sha256(trust_key(config_path).encode()).hexdigest()[:32]}.toml"


def changed_since_trust(config_path: Path | None) -> bool:
    """Whether the user trusted another version of this file (it is recorded, with other bytes than it has now)."""
    if config_path is None:
        return False
    data, _ = read_json(trust_file(), "trust record")
    recorded = data.get(trust_key(config_path)) if isinstance(data, dict) else None
    return isinstance(recorded, str) and not is_trusted(config_path)


def untrusted_state(config_path: Path | None) -> str:
    """Why the repository's config may not run, as said after its name: "is not trusted", or, for a file the user
    trusted before an edit, that it changed since (a bare "not trusted" read as if it had never been)."""
    if changed_since_trust(config_path):
        return "changed since you trusted it (what changed: `daintree trust --show`)"
    return "is not trusted"


def trust_diff(config_path: Path) -> list[str] | None:
    """The change since the user trusted the file, as unified-diff lines; None when no copy of what was trusted
    was kept (trusted by a version before the copies)."""
    import difflib  # here: only `daintree trust --show` compares

    try:
        before = trusted_copy(config_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        now = config_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        now = ""
    return [line.rstrip("\n") for line in difflib.unified_diff(
        before.splitlines(keepends=True), now.splitlines(keepends=True),
        fromfile=f"{REPO_CONFIG_NAME} (as you trusted it)", tofile=f"{REPO_CONFIG_NAME} (now)")]
