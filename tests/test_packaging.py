"""The wheel: built by the project's own backend (hatchling), it carries the styles from the top-level styles/
(mapped by force-include, no symlink in the tree), the license and the one version. `make wheel-check` installs
it in a fresh venv and runs it (CI does both)."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(out: Path) -> Path:
    """A wheel of this tree: with uv where it is (the Makefile's installer), else pip (`INSTALLER=pip`)."""
    uv = Path(sys.executable).with_name("uv")
    uv_path = str(uv) if uv.exists() else shutil.which("uv")
    if uv_path:
        command = [uv_path, "build", "--quiet", "--wheel", "--out-dir", str(out), str(ROOT)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("*.whl")
    return wheel


def test_the_wheel_carries_the_styles_license_and_version(tmp_path: Path) -> None:
    import daintree_tui

    assert not (ROOT / "daintree_tui" / "styles").exists(), "styles/ reaches the wheel by force-include, not a link"
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = set(wheel.namelist())
        styles = sorted(p.name for p in (ROOT / "styles").glob("*.tcss"))
        assert styles, "no styles in the tree"
        for name in styles:
            assert wheel.read(f"daintree_tui/styles/{name}") == (ROOT / "styles" / name).read_bytes()
        assert "daintree_tui/py.typed" in names
        dist_info = f"daintree_tui-{daintree_tui.__version__}.dist-info"
        assert wheel.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = email.message_from_bytes(wheel.read(f"{dist_info}/METADATA"))
        assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/"))]
    assert metadata["Version"] == daintree_tui.__version__
    assert metadata["License-Expression"] == "MIT"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert len(metadata.get_all("Requires-Dist") or []) == len(declared)
    assert "daintree-tui contributors" in (ROOT / "LICENSE").read_text()


def test_the_app_finds_its_styles_in_the_source_tree() -> None:
    """A checkout or an editable install has no daintree_tui/styles: the app reads the top-level styles/."""
    from daintree_tui.tui.app import STYLES

    assert STYLES.is_file() and STYLES.parent.name == "styles"
