"""Port leases: a contiguous block per worktree, free on 127.0.0.1 and unique across live leases."""

from __future__ import annotations

import socket
from collections.abc import Iterable

from daintree_tui.core.errors import OperationError


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port (we can bind it ourselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def lease_block(leased: Iterable[int], port_range: tuple[int, int], size: int) -> list[int]:
    """The first block of `size` consecutive ports in `port_range` that no live lease holds and all free now.

    The caller holds the project lock, so two parallel creates never lease the same block.
    """
    taken = set(leased)
    low, high = port_range
    start = low
    while start + size - 1 <= high:
        block = list(range(start, start + size))
        clash = [p for p in block if p in taken or not port_is_free(p)]
        if not clash:
            return block
        start = clash[-1] + 1
    raise OperationError(f"no block of {size} free ports left in {low}-{high} (ports.range)")
