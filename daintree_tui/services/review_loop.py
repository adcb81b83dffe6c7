"""Review with the agent in the loop: comments on lines of a worktree's diff sent to its agent as one prompt, CI
failures sent likewise, and the verdicts that the approval gate of a merge reads (`Services.reviews`).

The record is `core.review_record`; sending goes into the agent's live session as one bracketed paste, then
Enter once it shows (never into a shell: `paste_context` refuses one), or, with no agent running, starts the
worktree's agent with the text as its first prompt. Comments, sending and verdicts are a person's: refused from
inside any session.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import git as g
from daintree_tui.core import ownership
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.review_record import (
    APPROVE,
    REQUEST_CHANGES,
    Comment,
    Review,
    ReviewStore,
    Verdict,
    file_line,
    new_comment,
    outdated,
    plain_path,
    who,
)
from daintree_tui.core.sandbox import bring_in

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksCache, ChecksReport
    from daintree_tui.services.container import Services

APPROVALS_GATED = {"checks": ("checks",), "review": ("review",), "checks+review": ("checks", "review")}
"""What each `approval` asks of a merge; "none" and "human" (a person approves the agent's own calls) ask nothing."""


def short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


class ReviewLoop:
    """The reviews of one project's worktrees, and what they tell the agents."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.project = services.project
        self.store = ReviewStore(services.project)
        self._ci: ChecksCache | None = None

    # -- reading ---------------------------------------------------------------------------------------------

    def entry(self, name: str) -> WorktreeEntry:
        self.project.require_git()
        return self.services.worktrees.get(name, live=True)

    def head(self, entry: WorktreeEntry, *, quick: bool = False) -> str | None:
        """The commit the worktree's branch points at (read in the primary: the worktree's HEAD is the agent's),
        what its agent committed brought in first: read before, an approval or the gate saw a head the agent had
        already left, and the merge, which brings it in, took the commit nobody approved. `quick`: a bounded part
        of it, as the dashboard's poll brings it in (a view an agent may ask for through its inbox, again and
        again; the gate itself is asked once more of the commit the merge takes)."""
        bring_in(self.project, entry, quick=quick)
        return g.rev_parse_commit(self.project.root, entry.branch)

    def load(self, entry: WorktreeEntry) -> Review:
        return self.store.load(entry.name, entry.created_at)

    @property
    def ci(self) -> ChecksCache:
        """The last CI checks read in this process, per pull request."""
        if self._ci is None:
            from daintree_tui.services.ci import ChecksCache

            self._ci = ChecksCache()
        return self._ci

    def checks(self, review: Review, *, quick: bool = False) -> ChecksReport | None:
        """The CI checks of the worktree's pull request; None without one, or without gh. `quick`: for a read
        that must answer soon (MCP, the dashboard): checks read in the last minute as they are, else gh's answer
        within a few seconds, else the last ones read (marked stale, with their age). Otherwise a fresh read,
        however long gh takes (up to its timeout): what the merge gate asks."""
        if review.pr is None:
            return None
        from daintree_tui.services.ci import GH_TIMEOUT, QUICK_MAX_AGE, QUICK_TIMEOUT

        if quick:
            return self.ci.read(self.project.root, review.pr, timeout=QUICK_TIMEOUT, max_age=QUICK_MAX_AGE)
        return self.ci.read(self.project.root, review.pr, timeout=GH_TIMEOUT)

    def prs(self) -> dict[str, str]:
        """The pull request of every live local worktree that has one (`worktree pr` keeps its URL in the review)."""
        self.project.require_git()
        found: dict[str, str] = {}
        for entry in self.services.worktrees.entries():
            if not entry.live:
                continue
            try:
                pr = self.load(entry).pr
            except DaintreeError:
                continue  # a link where its record goes: `review NAME` says so
            if pr:
                found[entry.name] = pr
        return found

    def view(self, name: str, *, with_checks: bool = True, quick: bool = False) -> dict[str, Any]:
        """What `review NAME --json` prints: state of the current head, comments (each `outdated` when its line
        reads otherwise now), verdicts, the role's approval and what the merge gate still misses (`quick`: the
        CI checks as `checks(quick=True)` reads them)."""
        entry = self.entry(name)
        review = self.load(entry)
        head = self.head(entry, quick=True)
        worktree = Path(entry.path)
        role, approval = self.services.ops.review.approval_of(name)
        report = self.checks(review, quick=quick) if with_checks else None
        verdict = review.verdict_for(head)
        return {
            "worktree": name, "state": review.state(head), "head": head, "role": role, "approval": approval,
            "approved_by": verdict.by if verdict is not None and verdict.kind == APPROVE else None,
            "comments": [{**c.to_dict(), "outdated": outdated(c, worktree)} for c in review.comments],
            "verdicts": [v.to_dict() for v in review.verdicts], "pr": review.pr,
            "checks": report.to_dict() if report is not None else None,
            "missing": self.missing(entry, approval, review=review, head=head, report=report),
        }

    # -- the gate --------------------------------------------------------------------------------------------

    def missing(self, entry: WorktreeEntry, approval: str, *, verify: bool = True, review: Review | None = None,
                head: str | None = None, report: ChecksReport | None = None) -> list[str]:
        """What `approval` asks of a merge of `entry`'s current head that is not there (empty: go ahead)."""
        gated = APPROVALS_GATED.get(approval, ())
        if not gated:
            return []
        review = review if review is not None else self.load(entry)
        head = head if head is not None else self.head(entry)
        out: list[str] = []
        if "review" in gated:
            verdict = review.verdict_for(head)
            earlier = next((v for v in reversed(review.verdicts) if v.kind == APPROVE), None)
            if verdict is not None and verdict.kind == REQUEST_CHANGES:
                out.append(f"review: {verdict.by} requested changes on {short(head)}")
            elif verdict is None and earlier is not None:
                out.append(f"review: {earlier.by} approved {short(earlier.head)}, but the head is now {short(head)} "
                           f"(a new commit asks again: daintree review {entry.name} --approve)")
            elif verdict is None:
                out.append(f"review: nobody approved head {short(head)} (daintree review {entry.name} --approve)")
        if "checks" in gated:
            if not verify:
                out.append("checks: the pre_merge checks would be skipped (--no-verify)")
            report = report if report is not None else self.checks(review)
            if report is not None and report.state == "fail":
                out.append(f"checks: CI failed ({', '.join(c.name for c in report.failed[:5])})")
            elif report is not None and report.state == "pending":
                out.append("checks: CI is still running")
        return out

    # -- a person's changes ----------------------------------------------------------------------------------

    def _refuse_inside(self, what: str) -> None:
        if ownership.inside_session(self.project):
            raise OperationError(f"{what} is refused from inside a session: reviews are a person's, given outside "
                                 "any agent's session (an agent never reviews or approves its own work)")

    def comment(self, name: str, items: list[tuple[str, int, str]]) -> list[Comment]:
        """Comments, each on `path`:`line` of the worktree's files as they are (the new side of its diff): every
        one checked before any is kept, then all kept at once."""
        self._refuse_inside("a review comment")
        entry = self.entry(name)
        quoted: list[tuple[str, int, str, str]] = []
        for path, line, text in items:
            quote = file_line(Path(entry.path), plain_path(path), line)
            if quote is None:
                raise InputError(f"{path} has no line {line} in worktree {name} (comments are on the new side of "
                                 "the diff)")
            quoted.append((path, line, text, quote))
        head = self.head(entry)

        def add(review: Review) -> Review:
            for path, line, text, quote in quoted:
                review = new_comment(review, path, line, text, quote, head)
            return review

        review = self.store.update(name, add, entry.created_at)
        made = list(review.comments[len(review.comments) - len(quoted):])
        for comment in made:
            self.project.events.append("review.comment", worktree=entry.brief(), path=comment.path,
                                       line=comment.line, by=comment.by)
        return made

    def verdict(self, name: str, kind: str, message: str = "") -> Review:
        """Approve (or request changes on) the worktree's current head: a person's, never from inside a session."""
        self._refuse_inside("approving" if kind == APPROVE else "requesting changes")
        entry = self.entry(name)
        head = self.head(entry)
        if head is None:
            raise OperationError(f"{entry.branch} names no commit: nothing to approve")
        verdict = Verdict(kind, head, message.strip(), who(), time.time())
        review = self.store.update(name, lambda r: replace(r, verdicts=(*r.verdicts, verdict)), entry.created_at)
        event = "review.approved" if kind == APPROVE else "review.changes_requested"
        self.project.events.append(event, worktree=entry.brief(), commit=head, by=verdict.by)
        return review

    def remember_pr(self, name: str, url: str) -> None:
        """The pull request `worktree pr` opened, whose checks the review shows from now on."""
        entry = self.entry(name)
        if url:
            self.store.update(name, lambda r: replace(r, pr=url), entry.created_at)

    # -- telling the agent -----------------------------------------------------------------------------------

    def prompt(self, entry: WorktreeEntry, review: Review, comments: list[Comment]) -> str:
        head = self.head(entry)
        people = ", ".join(dict.fromkeys(c.by for c in comments))
        lines = [f"daintree review of your work in worktree {entry.name} (branch {entry.branch}, head "
                 f"{short(head)}): {len(comments)} comment{'s' if len(comments) != 1 else ''} from {people}.", ""]
        for number, comment in enumerate(comments, start=1):
            lines.append(f"{number}. {comment.path}:{comment.line}")
            if comment.quote is not None:
                lines.append(f"   > {comment.quote}")
            lines += [f"   {part}" for part in comment.text.splitlines()]
            lines.append("")
        verdict = review.verdict_for(head)
        if verdict is not None and verdict.kind == REQUEST_CHANGES and verdict.message:
            lines += [f"Changes requested: {verdict.message}", ""]
        lines.append("Address each comment on your branch and commit; the reviewer looks again at the new head.")
        return "\n".join(lines)

    def deliver(self, name: str, text: str) -> str:
        """Paste `text` into the agent's live session ("pasted"; Enter only once the paste shows, else refused),
        or start its agent with it ("started")."""
        from daintree_tui.sessions.status import SessionStatus

        services = self.services
        if services.host is None:
            raise OperationError("no session host (tmux is not installed): nothing can tell the agent")
        info = next((s for s in services.sessions.list() if s.name == name), None)
        if info is not None and info.status != SessionStatus.EXITED:
            if not services.sessions.paste_then_enter(name, text):
                raise OperationError(f"pasted into {name}'s session but not entered: its screen did not take the "
                                     "paste (a dialog? answer it there, enter on its row or daintree session "
                                     f"capture {name}, then send again); nothing is marked sent")
            return "pasted"
        record = services.sessions.record(name)
        services.ops.start_session(name, record.agent if record is not None else None, prompt=text,
                                   use_task_prompt=False)
        return "started"

    def send(self, name: str) -> dict[str, Any]:
        """Every unsent comment, as one prompt; each marked sent once it went."""
        self._refuse_inside("sending a review")
        entry = self.entry(name)
        review = self.load(entry)
        comments = review.unsent()
        if not comments:
            raise InputError(f"{name} has no unsent comments (add one: daintree review {name} --comment PATH:LINE "
                             "TEXT)")
        text = self.prompt(entry, review, comments)
        how = self.deliver(name, text)
        ids = {c.id for c in comments}
        now = time.time()
        self.store.update(name, lambda r: replace(r, comments=tuple(
            replace(c, sent_at=now) if c.id in ids and not c.sent else c for c in r.comments)), entry.created_at)
        self.project.events.append("review.sent", worktree=entry.brief(), comments=sorted(ids), how=how)
        return {"worktree": name, "sent": sorted(ids), "how": how, "text": text}

    def send_ci(self, name: str) -> dict[str, Any]:
        """The failed checks of the worktree's pull request, each with the end of its log, as one prompt."""
        from daintree_tui.services.ci import failed_log_tail

        self._refuse_inside("sending CI failures")
        entry = self.entry(name)
        review = self.load(entry)
        if review.pr is None:
            raise OperationError(f"{name} has no pull request (daintree worktree pr {name} opens one)")
        report = self.checks(review)
        if report is None:
            raise OperationError(f"the checks of {review.pr} cannot be read (is gh installed and logged in?)")
        failed = report.failed
        if not failed:
            raise OperationError(f"no failed checks on {review.pr} (CI: {report.state})")
        lines = [f"daintree: CI failed on your pull request {review.pr} (branch {entry.branch}): "
                 f"{', '.join(c.name for c in failed)}.", ""]
        for check in failed:
            tail = failed_log_tail(self.project.root, check)
            lines.append(f"{check.name} ({check.state or check.bucket}){': ' + check.link if check.link else ''}")
            if tail:
                lines += ["The end of its log:", "```", tail, "```"]
            lines.append("")
        lines.append("Fix it on your branch, commit and push; CI runs again on the new head.")
        text = "\n".join(lines)
        how = self.deliver(name, text)
        self.project.events.append("review.ci_sent", worktree=entry.brief(), checks=[c.name for c in failed], how=how)
        return {"worktree": name, "failed": [c.name for c in failed], "how": how, "text": text}
