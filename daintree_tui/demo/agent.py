"""A demo coding agent: behaves like one, needs no API key, and is deterministic for a seed.

It streams coloured progress, edits a file in its worktree (an uncommitted change to review), asks a question
and waits for a line of input, answers it, then idles (answering each further line) or exits with `--exit`.

    python -m daintree_tui.demo.agent [--task TEXT] [--seed N] [--speed X] [--exit] [--exit-code N]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import zlib
from pathlib import Path

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
DIM = "\x1b[2m"
GREEN = "\x1b[32m"
YELLOW = "\x1b[33m"
BLUE = "\x1b[34m"
MAGENTA = "\x1b[35m"
CYAN = "\x1b[36m"
ORANGE = "\x1b[38;2;255;135;0m"

STEPS = [
    ("Reading", "the repository layout"),
    ("Searching", "for the code the task touches"),
    ("Planning", "a small, reviewable change"),
    ("Editing", "{file}"),
    ("Running", "the tests"),
]
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def say(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)
    sys.stdout.flush()


def pause(seconds: float, speed: float) -> None:
    if speed > 0:
        time.sleep(seconds / speed)


def spin(label: str, seconds: float, speed: float, rng: random.Random) -> None:
    frames = max(1, int(seconds * 10))
    for i in range(frames):
        say(f"\r{CYAN}{SPINNER[i % len(SPINNER)]}{RESET} {label}", end="")
        pause(0.1, speed)
    say(f"\r{GREEN}✔{RESET} {label}   ")


def edit_file(task: str, seed: int) -> Path:
    """Append a note to a file in the worktree: an uncommitted change to review."""
    path = Path("NOTES.md")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"\n## Demo agent (seed {seed})\n\n- Task: {task}\n- Added a note; a real agent would edit code.\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo-agent", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--task", default=os.environ.get("DAINTREE_WORKTREE", "demo task"))
    default_seed = os.environ.get("DAINTREE_DEMO_SEED") or zlib.crc32(os.environ.get("DAINTREE_WORKTREE", "").encode())
    parser.add_argument("--seed", type=int, default=int(default_seed) % 10000)
    parser.add_argument("--speed", type=float, default=float(os.environ.get("DAINTREE_DEMO_SPEED", "1")))
    parser.add_argument("--exit", action="store_true", help="exit after answering instead of idling")
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    task = args.task.strip().splitlines()[0] if args.task.strip() else "demo task"
    say(f"{BOLD}{ORANGE}✻ demo agent{RESET} {DIM}(seed {args.seed}, no API key needed){RESET}")
    say(f"{DIM}cwd: {os.getcwd()}  port: {os.environ.get('PORT', '-')}{RESET}")
    say(f"{BOLD}Task:{RESET} {task}")
    say()
    target = "NOTES.md"
    for verb, what in STEPS:
        spin(f"{BOLD}{verb}{RESET} {what.format(file=target)}", rng.uniform(0.6, 1.4), args.speed, rng)
        if verb == "Editing":
            edit_file(task, args.seed)
            say(f"  {GREEN}+ {target}{RESET} {DIM}(1 file changed){RESET}")
        if verb == "Running":
            passed = rng.randint(8, 40)
            say(f"  {GREEN}{passed} passed{RESET}, {YELLOW}0 failed{RESET} {DIM}in {rng.uniform(0.2, 3):.2f}s{RESET}")
    say()
    say(f"{MAGENTA}?{RESET} {BOLD}Should I also update the documentation?{RESET} [y/n] > ", end="")
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        return 130
    if not answer:
        say()
        return args.exit_code
    reply = "Okay, updating the docs too." if answer.strip().lower().startswith("y") else "Okay, leaving the docs."
    say(f"{BLUE}●{RESET} {reply}")
    say(f"{GREEN}✔ Done.{RESET} Review the change with `daintree worktree diff` or in the dashboard.")
    if args.exit:
        return args.exit_code
    while True:
        say(f"{DIM}(idle; type a message){RESET} > ", end="")
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            return 130
        if not line:
            return args.exit_code
        if line.strip() in ("exit", "quit"):
            return args.exit_code
        say(f"{BLUE}●{RESET} You said: {line.strip()}")


if __name__ == "__main__":
    raise SystemExit(main())
