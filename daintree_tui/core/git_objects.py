"""Git's object store read by hand, without a fork: the name git gives some bytes, and whether the store (loose,
packed, or an alternate's) holds an object. Asked for every state file a command reads (`state_files`), where a
`git cat-file` per file would cost more than the command itself."""

from __future__ import annotations

import re
from pathlib import Path

from daintree_tui.core.log import suppressed


def blob_id(common: Path, data: bytes) -> bytes:
    """The object name git gives `data` as a blob in the repository at `common` (sha1, or sha256)."""
    try:
        config = (common / "config").read_text(errors="replace").lower()
    except OSError:
        config = ""
    sha256 = re.search(r"objectformat\s*=\s*sha256", config) is not None
    import hashlib  # here, not at the top: loading OpenSSL's library is 3-6 ms of every command's start

    hasher = hashlib.sha256() if sha256 else hashlib.sha1()  # git's object name, not a secret
    hasher.update(b"blob %d\0" % len(data) + data)
    return hasher.digest()


def object_exists(common: Path, name: bytes, before_ns: int) -> bool:
    """Whether object `name` (raw) is in the repository's objects, loose or packed, or its alternates', written no
    later than `before_ns` (git writes a checkout's objects before its files): a sandboxed agent can write loose
    objects, and one it made of daintree's own index after reading it would otherwise have that index ignored."""
    stores = [common / "objects"]
    with suppressed(OSError):
        for line in (common / "objects" / "info" / "alternates").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                stores.append((common / "objects" / line.strip()).resolve())
    hexname = name.hex()
    for store in stores:
        with suppressed(OSError):
            if (store / hexname[:2] / hexname[2:]).stat().st_mtime_ns <= before_ns:
                return True
        with suppressed(OSError):
            for idx in (store / "pack").glob("*.idx"):
                if idx.stat().st_mtime_ns <= before_ns and in_pack_index(idx, name):
                    return True
    return False


def in_pack_index(idx: Path, name: bytes) -> bool:
    """Whether a pack's index (version 2) lists `name`: a binary search of its sorted names."""
    size = len(name)
    with idx.open("rb") as fh:
        head = fh.read(8 + 256 * 4)
        if len(head) < 8 + 256 * 4 or head[:8] != b"\xfftOc\x00\x00\x00\x02":
            return False
        fanout = [int.from_bytes(head[8 + 4 * i:12 + 4 * i], "big") for i in range(256)]
        lo = fanout[name[0] - 1] if name[0] else 0
        hi = fanout[name[0]]
        while lo < hi:
            mid = (lo + hi) // 2
            fh.seek(8 + 256 * 4 + mid * size)
            here = fh.read(size)
            if here == name:
                return True
            if here < name:
                lo = mid + 1
            else:
                hi = mid
    return False
