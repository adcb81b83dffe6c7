"""The layering contract: core, sessions and the CLI's non-UI commands never import textual or rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
{imports}
bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))
print(','.join(bad))
"""


@pytest.mark.parametrize("imports", [
    "import daintree_tui.core.worktrees, daintree_tui.core.reconcile, daintree_tui.core.hooks",
    "import daintree_tui.sessions.manager, daintree_tui.sessions.emulator, daintree_tui.sessions.keys",
    "import daintree_tui.cli; daintree_tui.cli.build_parser()",
])
def test_no_ui_import(imports: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""


def test_cli_task_list_imports_no_ui(repo: Path) -> None:
    """Running a non-UI command end to end loads neither textual nor rich."""
    code = ("import sys, daintree_tui.cli as c; c.main(['task', 'list', '--repo', sys.argv[1]]);"
            "print('UI' if any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules) else 'clean')")
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("clean")
