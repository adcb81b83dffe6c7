"""The review of a worktree's work (`ops.review`): the approval gate its role asks of a merge (a person's approval of
the head, the pre_merge checks, its pull request's CI), those CI checks, and the review loop (comments on the
diff, sending them to the agent, a person's verdict)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from daintree_tui.core.errors import DaintreeError, OperationError
from daintree_tui.core.log import warn

if TYPE_CHECKING:
    from daintree_tui.core.review_record import Comment
    from daintree_tui.services.operations.core import Operations


class ReviewOps:
    """`ops.review`: what a worktree's role asks before its work lands, and the review that gives it."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.services = ops.services

    def approval_of(self, name: str) -> tuple[str | None, str]:
        """The role worktree `name` acts under (its task's, else its agent's, else `default_role`) and what that
        role's `approval` asks ("none" without roles)."""
        from daintree_tui.services.policy import role_of

        cfg = self.services.project.config
        if not cfg.roles:
            return None, "none"
        role = role_of(self.services.project, name)
        rules = cfg.roles.get(role) if role is not None else None
        return role, rules.approval if rules is not None else "none"

    def approval_missing(self, name: str, *, verify: bool = True, head: str | None = None) -> list[str]:
        """What the worktree's role asks of a merge of its current head that is not there: a person's approval
        of that head (`review`), the pre_merge checks not skipped and its pull request's CI not failing
        (`checks`). Asked by `worktree merge`, the merge train and the dashboard's merge alike; of `head`, the
        commit a merge will take, when it has one in hand (else the branch's, its agent's commits brought in)."""
        _, approval = self.approval_of(name)
        if approval in ("none", "human"):
            return []
        loop = self.services.reviews
        return loop.missing(loop.entry(name), approval, verify=verify, head=head)

    def require_approved(self, name: str, *, verify: bool = True, head: str | None = None) -> None:
        """Raises OperationError (one line naming what is missing) unless `approval_missing` is empty."""
        missing = self.approval_missing(name, verify=verify, head=head)
        if missing:
            role, approval = self.approval_of(name)
            raise OperationError(f"{name} is not approved for a merge (role {role!r}: approval = {approval!r}): "
                                 + "; ".join(missing))

    def ci_checks(self, name: str, *, quick: bool = False) -> dict[str, Any] | None:
        """The CI checks of the pull request `worktree pr` opened for worktree `name` (`gh pr checks`); None
        without one, without gh, or without an answer: nothing shows, nothing fails. `quick` (MCP): answered
        within seconds, the last checks read (with their `age`) when gh is slower (`ReviewLoop.checks`)."""
        loop = self.services.reviews
        try:
            report = loop.checks(loop.load(loop.entry(name)), quick=quick)
        except DaintreeError as exc:
            warn(f"checks of {name}: {exc}")
            return None
        return report.to_dict() if report is not None else None

    def get(self, name: str, *, quick: bool = False) -> dict[str, Any]:
        """The review of worktree `name` (`review NAME --json`, MCP `review_get` with `quick`: its CI checks
        within seconds, see `ci_checks`): read only."""
        return self.services.reviews.view(name, quick=quick)

    def comment(self, name: str, comments: list[tuple[str, int, str]]) -> list[Comment]:
        """Comments (path, new-side line, text) on worktree `name`'s diff: all checked, then all kept."""
        return self.services.reviews.comment(name, comments)

    def send(self, name: str) -> dict[str, Any]:
        """Every unsent comment to the agent as one paste into its live session (or its agent started with it)."""
        return self.services.reviews.send(name)

    def send_ci(self, name: str) -> dict[str, Any]:
        return self.services.reviews.send_ci(name)

    def verdict(self, name: str, kind: str, message: str = "") -> dict[str, Any]:
        """Approve (`approve`) or request changes on (`request-changes`) the worktree's current head; refused
        from inside a session."""
        self.services.reviews.verdict(name, kind, message)
        return self.get(name)
