"""The built-in demo repository: a small project, a few tasks, worktrees with demo agents working in them."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from daintree_tui.core.errors import InputError
from daintree_tui.core.project import Project
from daintree_tui.demo.registry import mark_demo
from daintree_tui.services import Services

FILES = {
    "README.md": "# shop\n\nA tiny web shop used to demo daintree.\n",
    ".gitignore": ".env\nnode_modules/\n__pycache__/\n",
    # Quick-create (`n`) in the demo starts a demo agent on the new task, not a bare shell.
    ".daintree.toml": 'default_agent = "demo"\n',
    "shop/__init__.py": "",
    "shop/auth.py": (
        "import hashlib\n\n\ndef hash_password(password: str) -> str:\n"
        "    return hashlib.sha256(password.encode()).hexdigest()\n\n\n"
        "def check(password: str, digest: str) -> bool:\n    return hash_password(password) == digest\n"
    ),
    "shop/cart.py": (
        "def total(items: list[tuple[str, float, int]]) -> float:\n"
        "    return sum(price * qty for _, price, qty in items)\n"
    ),
    "tests/test_cart.py": (
        "from shop.cart import total\n\n\ndef test_total() -> None:\n"
        "    assert total([('apple', 0.5, 4)]) == 2.0\n"
    ),
}

TASKS = [
    ("Refactor auth to use salted hashes", "shop/auth.py uses a bare sha256; switch to hashlib.scrypt with a salt."),
    ("Add a discount to the cart total", "total() should take an optional percentage discount."),
    ("Write a README section on running the tests", "Explain `pytest` and the layout of tests/."),
    ("Speed up the test suite", "Blocked until the auth refactor lands."),
]
AGENTS = [("auth-refactor", 1), ("cart-discount", 2), ("readme-tests", 3)]


def _git(path: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(path), "-c", "user.name=daintree demo", "-c", "user.email=demo@daintree.invalid",
                    *args], check=True, capture_output=True)


def create_demo_repo(path: Path | None = None, start_agents: bool = True) -> Path:
    """Create the demo repository (in a new temp dir unless `path` is given) and start its demo agents."""
    if path is not None and (path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir())))):
        # The demo writes README, .gitignore and .env and commits everything: never over someone's files.
        raise InputError(f"--path {path} is not an empty directory; give a new or empty one")
    root = path or Path(tempfile.mkdtemp(prefix="daintree-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    mark_demo(root)  # first, so that even a demo whose creation failed halfway can be cleaned
    for rel, text in FILES.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (root / ".env").write_text("SHOP_SECRET=demo\n", encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Initial shop")
    services = Services(Project.discover(root))
    for subject, description in TASKS:
        services.tasks.create(subject, description, blocked_by=[1] if subject.startswith("Speed") else ())
    for name, task_id in AGENTS:
        services.ops.create(name, task_id=task_id)
    if start_agents:
        from daintree_tui.sessions.host import tmux_available

        if tmux_available():
            for name, _ in AGENTS:
                services.ops.start_session(name, "demo", size=(120, 40))
    return root
