"""The feed's pending requests: whatever was asked for is taken by the next load, whichever load that is."""

from __future__ import annotations

import threading

from daintree_tui.tui.pending_names import PendingNames


def test_a_request_is_taken_once_by_the_next_take_and_all_absorbs_names() -> None:
    pending = PendingNames()
    assert pending.take() == frozenset()
    pending.add({"c"})
    pending.add({"d"})  # a newer request: c is not dropped for it
    assert pending.take() == {"c", "d"}
    assert pending.take() == frozenset()
    pending.add(None)
    pending.add({"e"})  # every worktree already covers e
    assert pending.take() is None
    assert PendingNames(everything=True).take() is None


def test_requests_from_many_threads_are_all_taken() -> None:
    pending = PendingNames()
    taken: set[str] = set()

    def ask(i: int) -> None:
        for j in range(200):
            pending.add({f"w{i}-{j}"})
            if j % 7 == 0:
                taken.update(pending.take() or ())

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken.update(pending.take() or ())
    assert taken == {f"w{i}-{j}" for i in range(4) for j in range(200)}
