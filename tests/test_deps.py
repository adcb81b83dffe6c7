"""Dependencies of a new worktree in a real monorepo: included files add to the defaults, every ignored
`node_modules` is linked, the look at the ignored files is bounded, and `create` says what it did."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from daintree_tui.core import deps
from tests.conftest import CLI, git


def write(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def monorepo(repo: Path) -> Path:
    write(repo / ".gitignore", "node_modules/\n.env*\ncerts/\nconfig/local/\n")
    write(repo / ".worktreeinclude", "# adds to deps.include\nconfig/local/\ncerts/dev.pem\n!.env.production\n")
    for package in ("web", "api"):
        write(repo / "packages" / package / "package.json", "{}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "monorepo")
    write(repo / ".env", "ROOT=1\n")
    write(repo / ".env.production", "PROD=1\n")  # excluded by the `!` pattern
    write(repo / "packages" / "web" / ".env.local", "WEB=1\n")
    write(repo / "certs" / "dev.pem", "dev\n")
    write(repo / "certs" / "prod.pem", "prod\n")  # in an ignored dir, not named: never looked at
    write(repo / "config" / "local" / "db.json", "{}\n")
    write(repo / "node_modules" / "left-pad" / "index.js")
    write(repo / "node_modules" / "left-pad" / "node_modules" / "dep" / "index.js")  # inside a linked dir
    write(repo / "packages" / "web" / "node_modules" / "react" / "index.js")
    write(repo / "packages" / "web" / "node_modules" / "react" / ".env", "NOT_OURS=1\n")  # a package's own
    write(repo / "packages" / "api" / "node_modules" / "express" / "index.js")
    return repo


def test_monorepo_gets_its_files_and_every_node_modules(cli: CLI, monorepo: Path) -> None:
    data = cli.json("worktree", "create", "mono")
    assert data["copied"] == [".env", "certs/dev.pem", "config/local/db.json", "packages/web/.env.local"]
    assert data["linked"] == [{"path": p, "mode": "symlink"} for p in
                              ("node_modules", "packages/api/node_modules", "packages/web/node_modules")]
    wt = Path(data["path"])
    for rel in ("node_modules", "packages/api/node_modules", "packages/web/node_modules"):
        assert (wt / rel).is_symlink() and (wt / rel).resolve() == (monorepo / rel).resolve()
    assert not (wt / ".env.production").exists() and not (wt / "certs" / "prod.pem").exists()
    assert (wt / "packages" / "web" / ".env.local").read_text() == "WEB=1\n"
    assert not (wt / "packages" / "web" / ".env.local").is_symlink()
    assert git(wt, "status", "--short") == ""  # no link shows as untracked, at any depth
    cli.ok("worktree", "remove", "mono")  # nor blocks remove
    assert (monorepo / "packages" / "web" / "node_modules" / "react" / "index.js").exists()


def test_create_says_what_it_copied_and_linked(cli: CLI, monorepo: Path) -> None:
    (monorepo / ".daintree.toml").write_text('[deps]\nlink = [{path = "node_modules"}, '
                                             '{path = "packages/api/node_modules", mode = "copy"}]\n')
    out = cli.ok("worktree", "create", "told").stdout.splitlines()
    assert "copied .env, certs/dev.pem, config/local/db.json, packages/web/.env.local" in out
    assert "linked node_modules, packages/web/node_modules (symlink)" in out
    assert "copied packages/api/node_modules (copy)" in out
    copy = monorepo / ".worktrees" / "told" / "packages" / "api" / "node_modules"
    assert copy.is_dir() and not copy.is_symlink() and (copy / "express" / "index.js").exists()


def test_worktreeinclude_adds_to_the_defaults(cli: CLI, repo: Path) -> None:
    write(repo / ".gitignore", ".env\n*.key\n")
    write(repo / ".worktreeinclude", "dev.key\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "include")
    write(repo / ".env", "A=1\n")
    write(repo / "dev.key")
    write(repo / "other.key")
    assert cli.json("worktree", "create", "inc")["copied"] == [".env", "dev.key"]


def test_the_look_at_ignored_files_never_walks_into_ignored_dirs_and_is_capped(
        monorepo: Path, caplog: pytest.LogCaptureFixture) -> None:
    for i in range(300):
        write(monorepo / "packages" / "web" / "node_modules" / f"pkg{i}" / "index.js")
    ignored = deps.scan_ignored(monorepo, [])
    assert ignored.complete
    assert "packages/web/node_modules" in ignored.dirs
    assert not any("node_modules/" in f for f in ignored.files)  # 300 packages, reported as one directory
    assert len(ignored.files) + len(ignored.dirs) < 15
    logger = logging.getLogger("daintree")  # the CLI may have stopped it propagating to the root logger
    logger.addHandler(caplog.handler)
    try:
        capped = deps.scan_ignored(monorepo, [], limit=3)
    finally:
        logger.removeHandler(caplog.handler)
    assert not capped.complete and len(capped.files) + len(capped.dirs) <= 3
    assert "stopped after 3 ignored entries" in caplog.text


def test_a_link_spec_with_a_slash_is_anchored_and_none_links_nothing(repo: Path) -> None:
    from daintree_tui.core.config import LinkSpec

    write(repo / ".gitignore", "vendor/\nnode_modules/\n")
    write(repo / "vendor" / "a.txt")
    write(repo / "lib" / "vendor" / "b.txt")
    write(repo / "node_modules" / "c.js")
    ignored = deps.scan_ignored(repo, [])
    targets = deps.dirs_to_link(ignored, [LinkSpec("lib/vendor"), LinkSpec("node_modules", "none")])
    assert [(rel, spec.path) for rel, spec in targets] == [("lib/vendor", "lib/vendor")]
