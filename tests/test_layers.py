"""The layering contract (DESIGN.md section 2): core, then sessions, then services, then the interfaces (tui, then
cli and mcp). A module imports only from its own layer and those below, function-level imports included; and the
layers below the interfaces never load textual or rich."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "daintree_tui"

# Rank of each layer; a module may import its own rank or lower. `demo` builds a repository with sessions in it,
# like a service; the package's own __init__/__main__ start the CLI.
RANK = {"core": 0, "sessions": 1, "services": 2, "demo": 2, "tui": 3, "cli": 4, "mcp": 4}


def layer_of(module: str) -> str | None:
    """`daintree_tui.<layer>...` -> layer; None for the package's own top-level modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "daintree_tui" and parts[1] in RANK else None


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every module `path` imports anywhere (module level, functions, TYPE_CHECKING blocks), relative ones
    resolved: (line, module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from daintree_tui import cli` names a layer in the alias
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if target == "daintree_tui"]
    return found


def crossings(root: Path = PACKAGE) -> list[str]:
    """Every import that climbs a layer, as `file:line: importer -> imported`."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        importer = layer_of(module_name(path, root))
        if importer is None:
            continue
        for line, target in imported_modules(path, root):
            imported = layer_of(target)
            if imported is not None and RANK[imported] > RANK[importer]:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {importer} -> {target}")
    return bad


def test_no_import_climbs_a_layer() -> None:
    assert crossings() == []


def test_the_check_sees_a_function_level_crossing(tmp_path: Path) -> None:
    """The check itself: a core module importing the services inside a function is caught."""
    fake = tmp_path / "daintree_tui"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "thing.py").write_text(
        "def later() -> None:\n    from daintree_tui.services.queue import QueueRunner\n")
    (fake / "sessions").mkdir()
    (fake / "sessions" / "x.py").write_text("if True:\n    from .. import services\n")
    assert crossings(fake) == ["daintree_tui/core/thing.py:2: core -> daintree_tui.services.queue",
                     "daintree_tui/sessions/x.py:2: sessions -> daintree_tui.services"]


PROBE = """
import sys
{imports}
bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))
print(','.join(bad))
"""


@pytest.mark.parametrize("imports", [
    "import daintree_tui.core",
    "import daintree_tui.sessions",
    "import daintree_tui.services",
    "import pkgutil, importlib, daintree_tui.core as p\n"
    "for m in pkgutil.walk_packages(p.__path__, 'daintree_tui.core.'): importlib.import_module(m.name)",
    "import pkgutil, importlib, daintree_tui.sessions as p\n"
    "for m in pkgutil.walk_packages(p.__path__, 'daintree_tui.sessions.'): importlib.import_module(m.name)",
    "import pkgutil, importlib, daintree_tui.services as p\n"
    "for m in pkgutil.walk_packages(p.__path__, 'daintree_tui.services.'): importlib.import_module(m.name)",
    "import daintree_tui.cli.dispatch as d; d.build_parser()",
])
def test_no_ui_import(imports: str) -> None:
    """Every module of core, sessions and services, imported in a fresh interpreter, loads neither textual nor
    rich (nor does the CLI's parser)."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""


def test_cli_task_list_imports_no_ui(repo: Path) -> None:
    """Running a non-UI command end to end loads neither textual nor rich."""
    code = ("import sys, daintree_tui.cli as c; c.main(['task', 'list', '--repo', sys.argv[1]]);"
            "print('UI' if any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules) else 'clean')")
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("clean")


def runtime_imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """The modules of ours that `path` imports when it runs: function-level imports included, `if TYPE_CHECKING:`
    blocks left out (they never run); `from pkg import mod` names the submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])]) \
                if node.level else node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found & {module_name(p, root) for p in root.rglob("*.py")}


def import_cycles(layer: str, root: Path = PACKAGE) -> list[list[str]]:
    """The groups of modules of `layer` that import each other in a loop when they run (Tarjan's components)."""
    graph = {module_name(p, root): runtime_imports(p, root) for p in sorted((root / layer).rglob("*.py"))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node] & graph.keys():
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_core_imports_form_no_cycle() -> None:
    """No loop among the domain's modules, function-level imports included: an import moved into a function
    only to break a loop hides the loop, it does not remove it (those left are there for start-up speed)."""
    assert import_cycles("core") == []


def test_the_cycle_check_sees_a_loop_hidden_in_a_function(tmp_path: Path) -> None:
    fake = tmp_path / "daintree_tui"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "a.py").write_text("from daintree_tui.core import b\n")
    (fake / "core" / "b.py").write_text("def later() -> None:\n    from daintree_tui.core.a import x\n")
    (fake / "core" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from daintree_tui.core.a import x\n")
    (fake / "core" / "d.py").write_text("from daintree_tui.core import c\n")
    assert import_cycles("core", fake) == [["daintree_tui.core.a", "daintree_tui.core.b"]]


MODULE_LINES = 450

LONG_MODULES: dict[str, str] = {}
"""The modules (path under daintree_tui/) let past MODULE_LINES, each with the written reason it is one job all the
same. None now. No test gives the UI (tui/) a lower limit of its own, so its modules are held to this one too."""


def long_modules(root: Path = PACKAGE, limit: int = MODULE_LINES) -> dict[str, int]:
    """Every module of the package (any layer, the interfaces included) longer than `limit` lines: its lines."""
    return {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit}


def test_modules_are_split_by_job() -> None:
    """No module of the package grows past ~450 lines: one that does has taken a second job (issue 28). An
    exception is written down in LONG_MODULES with its reason, and leaves the list once it is short again."""
    long = long_modules()
    assert {path: n for path, n in long.items() if path not in LONG_MODULES} == {}
    assert sorted(set(LONG_MODULES) - set(long)) == []
    assert [path for path, reason in LONG_MODULES.items() if not reason.strip()] == []


# -- one place composes each operation (the package services/operations/) ----------------------------------------

# The steps an operation is made of, by receiver (the attribute or variable the method is called on: the services'
# own names for these objects) and method, and the checks that go with them. Above the sessions layer only
# the modules of services/operations/ call them; an interface (cli, tui, mcp), the demo and the other services (queue,
# bake-off, inbox) ask `services.ops` for the whole operation, checks and all. The check sees calls by these
# names: a step reached through another alias is not seen, so it is a tripwire for the habit, not a proof.
STEPS = {
    "worktrees": {"create", "create_reporting", "remove", "keep"},
    "sessions": {"start", "restart"},
    "manager": {"start", "restart"},
    "review": {"merge", "commit", "pr"},
    "bakeoffs": {"create", "pick"},
}
CHECKS = {"require_agent_trusted", "refuse_foreign", "check_program", "refuse_prompt_for"}
COMPOSER = "daintree_tui.services.operations"
"""The package that composes: it and every module under it (`Services.ops` and its parts)."""


def composes(module: str) -> bool:
    return module == COMPOSER or module.startswith(COMPOSER + ".")


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def composed_outside(root: Path = PACKAGE) -> list[str]:
    """Every call of an operation's step or check outside services/operations/, above the sessions layer."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        layer = layer_of(module)
        if layer is None or RANK[layer] < RANK["services"] or composes(module):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            receiver = _receiver(func.value) if isinstance(func, ast.Attribute) else None
            what = f"{receiver}.{name}" if receiver else name
            if name in CHECKS or name in STEPS.get(receiver or "", ()):
                bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: {what}")
    return bad


def test_only_operations_composes_operations() -> None:
    assert composed_outside() == []


def test_the_composition_check_sees_a_step_and_a_check(tmp_path: Path) -> None:
    """The check itself: the dashboard's old quick-create (a check and two steps of its own) is caught; the same
    calls in the package services/operations/ (its __init__ or any module under it), or below the services, are
    not; a module beside the package whose name only starts like it is no part of it."""
    fake = tmp_path / "daintree_tui"
    for folder in ("tui", "services/operations", "sessions"):
        (fake / folder).mkdir(parents=True)
    body = ("def quick(self, subject):\n    preset = self.sessions.preset(None)\n    preset.check_program()\n"
            "    entry = self.worktrees.create(subject)\n    self.sessions.start(entry.name, preset.name)\n")
    (fake / "tui" / "backend.py").write_text(body)
    (fake / "services" / "operations" / "__init__.py").write_text(body)
    (fake / "services" / "operations" / "core.py").write_text(body)
    (fake / "services" / "operations_old.py").write_text(body)
    (fake / "sessions" / "manager.py").write_text(body)
    assert composed_outside(fake) == ["daintree_tui/services/operations_old.py:3: preset.check_program",
                                      "daintree_tui/services/operations_old.py:4: worktrees.create",
                                      "daintree_tui/services/operations_old.py:5: sessions.start",
                                      "daintree_tui/tui/backend.py:3: preset.check_program",
                                      "daintree_tui/tui/backend.py:4: worktrees.create",
                                      "daintree_tui/tui/backend.py:5: sessions.start"]


# -- tests by subject, what they share in tests/helpers/ (issue 28) ---------------------------------------------

TESTS = Path(__file__).resolve().parent


def names_a_test_module(module: str, root: Path = TESTS) -> bool:
    """`test_x...` (the tests folder on sys.path) or `tests.test_x...`: a module of the test suite's own tests."""
    parts = module.split(".")
    return parts[0].startswith("test_") or (parts[0] == root.name and len(parts) > 1 and parts[1].startswith("test_"))


def imports_of_test_modules(root: Path = TESTS) -> list[str]:
    """Every import of a test module (tests/test_*.py) anywhere under `root` (test modules, conftest, helpers;
    function-level imports included, relative ones resolved), as `file:line: module`."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        package = list(path.relative_to(root.parent).parent.parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names if names_a_test_module(alias.name, root)]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])]) \
                    if node.level else node.module or ""
                found = [base] if names_a_test_module(base, root) else [
                    f"{base}.{alias.name}" for alias in node.names if names_a_test_module(f"{base}.{alias.name}", root)]
            else:
                continue
            bad += [f"{path.relative_to(root.parent)}:{node.lineno}: {module}" for module in found]
    return bad


def test_no_test_module_imports_another() -> None:
    """A test module holds tests of one subject; what several share is in tests/helpers/ (helpers by name,
    fixtures through conftest's `pytest_plugins`), never taken from another test module."""
    assert imports_of_test_modules() == []


def test_the_import_check_sees_a_test_module_imported_every_way(tmp_path: Path) -> None:
    """The check itself: a test module taken by any spelling (absolute, bare, relative, as an attribute of the
    package, inside a function), by a test module or a helper, is caught; conftest, helpers and a module of
    tests/ that is not a test module are not."""
    fake = tmp_path / "tests"
    (fake / "helpers").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "helpers" / "__init__.py").write_text("")
    (fake / "test_b.py").write_text("def test_x() -> None:\n    pass\n")
    (fake / "test_a.py").write_text(
        "import tests.test_b\nfrom tests.test_b import x\nfrom test_b import y\nfrom .test_b import z\n"
        "from . import test_b\nfrom tests import test_b as other\n"
        "from tests.conftest import CLI\nfrom tests.helpers.dashboard import until\nfrom tests import sshd\n"
        "from .helpers import dialogs\nimport testing_tools\n"
        "def later() -> None:\n    from tests.test_b import w\n")
    (fake / "helpers" / "radar.py").write_text("from ..test_b import x\nfrom . import test_data\n")
    assert imports_of_test_modules(fake) == [
        "tests/helpers/radar.py:1: tests.test_b",
        "tests/test_a.py:1: tests.test_b", "tests/test_a.py:2: tests.test_b", "tests/test_a.py:3: test_b",
        "tests/test_a.py:4: tests.test_b", "tests/test_a.py:5: tests.test_b", "tests/test_a.py:6: tests.test_b",
        "tests/test_a.py:13: tests.test_b"]


def _module_runs(source: str) -> list[int]:
    """The lines of `source` that start `python -m` by hand: a list or call with `sys.executable` followed by a
    literal `"-m"` (`core.spawn.python_module` is the one place that may)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr] = node.elts if isinstance(node, (ast.List, ast.Tuple)) else \
            node.args if isinstance(node, ast.Call) else []
        for first, second in itertools.pairwise(items):
            if (isinstance(first, ast.Attribute) and first.attr == "executable"
                    and isinstance(second, ast.Constant) and second.value == "-m"):
                found.append(node.lineno)
    return found


def test_daintrees_own_python_starts_through_python_module_alone() -> None:
    """`python -m` puts the folder it starts in first on the import path, and many of ours start in a worktree:
    each goes through `python_module` (`-P`), or `-I` (the pane's launcher)."""
    bad = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
           for line in _module_runs(path.read_text())]
    assert not bad, bad


def test_the_python_check_sees_a_hand_made_module_run() -> None:
    assert _module_runs('import sys\nargv = [sys.executable, "-m", "x"]\n') == [2]
    assert _module_runs('import sys\nargv = [sys.executable, "-P", "-m", "x"]\n') == []
