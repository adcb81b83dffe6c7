"""The commands of the README and the docs pages work as shown.

Every `$ daintree ...` line of every ```console block runs, in the order of STORY (the README, then the docs
pages as the manual tells its story), through the real CLI against one temp repository shaped like the docs'
`shop` (a tracked `src/auth.py`, a `package.json` whose test checks `PORT`). Agents are small programs named
`claude`, `codex` and `gemini` put first on PATH: each commits one file of work, prints that it is ready and
echoes what it is sent (the worktree `auth-refactor` also leaves the two uncommitted files the docs' refused
`remove` names). A command passes when it exits 0, or 1 when the docs show an error line (`daintree: ...`)
after it; the start of every other line the docs show after a command (up to the first path or number) must
start a line of its output, and a table header must match word for word. The commands that need the network or
a real remote host are skipped by name, below.

The command lists under "## Commands" (the README's short one, docs/cli.md's whole one) are checked too: every
command they name parses (`--help`) and has every option the line shows.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CLI, git, wait_for

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The pages whose console blocks tell one story, in its order: each command may rely on those before it (the
# worktrees the getting-started session made, the tasks the bake-off adds). The MCP page starts a repository of
# its own (see `before`); what follows it runs there.
STORY = ("README.md", "docs/getting-started.md", "docs/orchestration.md", "docs/remote-hosts.md", "docs/mcp.md",
         "docs/security.md", "docs/worktrees.md", "docs/agents.md")
COMMAND_LISTS = ("README.md", "docs/cli.md")


def story_text() -> str:
    return "\n".join((ROOT / page).read_text(encoding="utf-8") for page in STORY)


def docs_text() -> str:
    """The README and every docs page: where a fact the tests look for may live."""
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)

# Commands that cannot run here, each with the reason (matched against the command as written, comment cut).
SKIP = {
    "daintree worktree pr ui-login --draft": "pushes to a remote and calls GitHub's gh",
    "daintree queue run": "runs until interrupted (tests/test_orchestrate.py drives the queue)",
    "daintree host check box": "needs the remote host build-box over ssh (tests/test_remote.py uses a real sshd)",
    "daintree worktree create search --agent claude --host box": "needs the remote host",
    "daintree worktree list --host box": "needs the remote host",
    "daintree session capture search --host box": "needs the remote host",
    "daintree worktree events --follow --host box": "needs the remote host",
    "daintree worktree run search --host box -- make test": "needs the remote host",
    "daintree worktree merge search --host box": "needs the remote host",
}
# Commands that run a program the docs' example project uses; skipped only where it is missing.
NEEDS = {"daintree worktree run ui-login -- npm test": "npm", "daintree sandbox check one": "bwrap"}

STUB_AGENT = '''#!{python}
"""A stand-in agent for the docs' story: commits its work, says it is ready, echoes what it is sent."""
import os, subprocess, sys

agent = os.path.basename(sys.argv[0])
def git(*args):
    subprocess.run(["git", *args], check=True, capture_output=True)

with open(f"work-{{agent}}.txt", "w") as fh:
    fh.write(f"done in {{os.environ.get('DAINTREE_WORKTREE')}}\\n")  # never the same as a merged one
git("add", f"work-{{agent}}.txt")
git("commit", "-q", "-m", f"{{agent}}: work")
if os.environ.get("DAINTREE_WORKTREE") == "auth-refactor":
    with open("src/auth.py", "a") as fh:
        fh.write("# salted\\n")
    with open("NOTES.md", "w") as fh:
        fh.write("notes\\n")
print("stub agent ready", flush=True)
for line in sys.stdin:
    print("got:", line.strip(), flush=True)
'''


@dataclass
class Command:
    argv: list[str]  # as written, without its comment
    shown: list[str] = field(default_factory=list)  # the output lines the docs show after it

    @property
    def line(self) -> str:
        return " ".join(self.argv)


def console_commands(text: str) -> list[Command]:
    commands: list[Command] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M):
        for raw in block.splitlines():
            if raw.startswith("$ "):
                commands.append(Command(shlex.split(raw[2:], comments=True)))
            elif commands and raw.strip():
                commands[-1].shown.append(raw.strip())
    return commands


def reference_lines(text: str, page: str = "README.md") -> list[str]:
    block = re.search(r"^##+ Commands\n.*?^```\n(.*?)^```", text, flags=re.S | re.M)
    assert block, f"{page} has no ## Commands list"
    return [ln for ln in block.group(1).splitlines() if ln.startswith("daintree")]


def fixed_start(line: str) -> list[str]:
    """The words of a shown line up to the first that holds a path or a number (those differ per run)."""
    words = []
    for word in line.split():
        if "/" in word or any(c.isdigit() for c in word) or "…" in word:
            break
        words.append(word)
    return words


def is_header(line: str) -> bool:
    words = line.split()
    return len(words) > 1 and all(w == w.upper() and any(c.isalpha() for c in w) for w in words)


def check_shown(command: Command, output: str) -> None:
    lines = [ln.split() for ln in output.splitlines()]
    for shown in command.shown:
        if shown.startswith(("[", "{")) or shown in ("...", "…"):
            continue  # JSON (what it holds depends on the run), or lines left out
        if is_header(shown):
            assert shown.split() in lines, f"{command.line}: header {shown!r} not in output:\n{output}"
            continue
        start = fixed_start(shown)
        if start:
            assert any(ln[:len(start)] == start for ln in lines), (
                f"{command.line}: the docs show {shown!r}, output has no line starting {' '.join(start)!r}:\n{output}")


def shop_repo(path: Path) -> Path:
    """The docs' example project."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "src").mkdir()
    (path / "src" / "auth.py").write_text("def check(password):\n    return False\n")
    (path / "package.json").write_text(
        '{"name": "shop", "scripts": {"test": "node -e \\"process.exit(process.env.PORT ? 0 : 1)\\""}}\n')
    (path / "bench.sh").write_text("#!/bin/sh\necho 42\n")
    (path / "bench.sh").chmod(0o755)
    (path / "packages" / "web").mkdir(parents=True)
    (path / "packages" / "web" / "package.json").write_text("{}\n")
    (path / ".gitignore").write_text("node_modules/\n.env*\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "shop")
    return path


def stub_agents(bin_dir: Path) -> None:
    """The agents, and the shop's test runner its bakeoff scores with: whatever `pytest` the machine has on PATH
    (a pyenv shim here: four of them at once took 5 s) would find no tests in the shop and fail every candidate."""
    bin_dir.mkdir()
    for name in ("claude", "codex", "gemini"):
        script = bin_dir / name
        script.write_text(STUB_AGENT.format(python=sys.executable))
        script.chmod(0o755)
    (bin_dir / "pytest").write_text("#!/bin/sh\necho '3 passed'\n")
    (bin_dir / "pytest").chmod(0o755)


def toml_block_with(text: str, needle: str) -> str:
    block = next(b for b in re.findall(r"^```toml\n(.*?)^```", text, flags=re.S | re.M) if needle in b)
    return block


def before(command: Command, cli: CLI, tmp_path: Path) -> CLI:
    """What the docs' story had done before a block that starts afresh; the CLI to run the command with."""
    if command.line.startswith("daintree task create Ship login"):
        # "A lead agent": a new repository (its task is task 1) with the configuration shown above the block, in
        # the user's own config (a repository's agent commands would first need `daintree trust`).
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(toml_block_with(story_text(), "[agents.lead]"))
        return CLI(shop_repo(tmp_path / "lead-shop"))
    if command.line == "daintree sandbox check one":  # its example: worktree one beside another agent's two
        for name in ("one", "two"):
            cli.ok("worktree", "create", name)
    if command.line.startswith("daintree bakeoff create 4"):
        cli.ok("task", "create", "Write the changelog")
        cli.ok("task", "create", "Fix parser")
    if command.line == "daintree worktree create web-login":  # what a JS monorepo has that git does not carry
        for rel in (".env", "packages/web/.env.local", "node_modules/react/index.js",
                    "packages/web/node_modules/vite/index.js"):
            (cli.cwd / rel).parent.mkdir(parents=True, exist_ok=True)
            (cli.cwd / rel).write_text("x\n")
    return cli


def wait_for_agents(cli: CLI) -> None:
    """Every stub agent has done its work (the next command may look at it)."""
    proc = cli("session", "list", "--json")
    if proc.returncode != 0:
        return
    import json

    for session in json.loads(proc.stdout):
        if session["status"] != "exited":
            log = Path(session["log"])
            wait_for(lambda log=log: log.exists() and b"stub agent ready" in log.read_bytes(), timeout=60)


@pytest.mark.usefixtures("tmux_socket")
def test_every_console_command_runs_as_shown(tmp_path: Path) -> None:
    repo = shop_repo(tmp_path / "shop")
    stub_agents(tmp_path / "bin")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    cli = CLI(repo)
    told = {str(page.relative_to(ROOT)) for page in [README, *DOCS.rglob("*.md")]
            if "```console" in page.read_text(encoding="utf-8")}
    assert told == set(STORY), f"pages with console blocks missing from STORY (or gone): {told ^ set(STORY)}"
    commands = console_commands(story_text())
    daintree = [c for c in commands if c.line.startswith("daintree")]
    assert len(daintree) >= 20, "the docs' console blocks were not found"
    assert set(SKIP) <= {c.line for c in daintree}, "a skipped command is no longer in the docs"
    ran = 0
    for command in daintree:
        if command.line in SKIP or (command.line in NEEDS and shutil.which(NEEDS[command.line]) is None):
            continue
        cli = before(command, cli, tmp_path)
        proc = cli(*command.argv[1:], env=env, timeout=120)
        refused = any(s.startswith("daintree: ") for s in command.shown)
        expected = 1 if refused else 0
        assert proc.returncode == expected, (
            f"$ {command.line}\nexit {proc.returncode}, the docs show exit {expected}\n{proc.stdout}{proc.stderr}")
        check_shown(command, proc.stdout + proc.stderr)
        wait_for_agents(cli)
        ran += 1
    assert ran >= 15


def test_reference_block_names_real_commands_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    from daintree_tui.cli import main

    lines = [line for page in COMMAND_LISTS
             for line in reference_lines((ROOT / page).read_text(encoding="utf-8"), page)]
    assert len(lines) >= 8
    for line in lines:
        usage = re.split(r"\s{2,}", line)[0]  # cut the description
        alternatives = [a.strip() for a in usage[len("daintree"):].split(" | ")]
        first_words: list[str] = []
        checks: list[tuple[list[str], str]] = []
        for alt in alternatives:
            words = []
            for word in alt.split():
                if not re.fullmatch(r"[a-z][a-z-]*", word):
                    break
                words.append(word)
            if not words and alt.startswith("-") and checks:  # `--task | --file PATH`: options of the same command
                checks[-1] = (checks[-1][0], checks[-1][1] + " " + alt)
                continue
            if not first_words:
                first_words = words
            elif len(first_words) > 1:
                words = [first_words[0], *words]  # `task list | show ID`: same group
            checks.append((words, alt))
        for words, alt in checks:
            code = main([*words, "--help"])
            help_text = capsys.readouterr().out
            assert code == 0, f"command list line {line!r}: `daintree {' '.join(words)}` is not a command"
            for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", alt):
                assert option in help_text, f"command list line {line!r}: `daintree {' '.join(words)}` has no {option}"


@pytest.mark.usefixtures("tmux_socket")
def test_the_attach_command_works_from_inside_a_session(cli: CLI, repo: Path) -> None:
    """The docs' attach line, typed into a pane of the same server (an unsandboxed shell session's, where tmux
    has set TMUX):
    tried for real, tmux refused it there ("sessions should be nested with care, unset $TMUX to force"), and
    `unset $TMUX` is no shell command."""
    import subprocess

    from tests.conftest import trusted_config

    found = re.search(r"`((?:\S+ )*tmux -L (daintree-[0-9a-f]+) attach -t =dt-([\w.-]+))`", docs_text())
    assert found, "the docs' attach command was not found"
    line, socket_shown, name = found.groups()
    trusted_config(repo, "[agents.marker]\ncommand = \"sh -c 'echo attached-to-the-agent; exec cat'\"\n"
                         "[agents.console]\ncommand = \"sh\"\nsandbox = \"off\"\n")  # a sandbox hides the socket
    cli.ok("worktree", "create", name)
    cli.ok("session", "start", name, "--agent", "marker")
    cli.ok("worktree", "create", "console")
    cli.ok("session", "start", "console", "--agent", "console")
    socket = {s["name"]: s for s in cli.json("session", "list")}["console"]["socket"]

    def console(command: str, *args: str) -> str:
        return subprocess.run(["tmux", "-L", socket, command, "-t", "=dt-console:", *args], capture_output=True,
                              text=True, check=False).stdout

    wait_for(lambda: console("capture-pane", "-p").strip())  # the shell's prompt: it reads what is typed now
    console("send-keys", "env | grep -c ^TMUX=/", "Enter")  # the pane is inside tmux, as tmux set it
    wait_for(lambda: "1" in [line.strip(" #$") for line in console("capture-pane", "-p").splitlines()[1:]])
    console("send-keys", line.replace(socket_shown, socket), "Enter")
    wait_for(lambda: "attached-to-the-agent" in console("capture-pane", "-p")
             or "nested with care" in console("capture-pane", "-p"), timeout=30)
    assert "attached-to-the-agent" in console("capture-pane", "-p"), console("capture-pane", "-p")
