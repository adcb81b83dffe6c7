"""Where a sandboxed session finds what is mounted for it: a module of constants only, so that a command can ask
"am I inside a sandbox?" with one stat and without importing the sandbox machinery (`core/sandbox/`)."""

from __future__ import annotations

from pathlib import Path

INBOX_MOUNT = Path("/run/daintree/inbox")
# The shared object store, read-only: the quarantine that a sandbox sees as `objects/` names it as its alternate.
SHARED_OBJECTS_MOUNT = Path("/run/daintree/objects")
# With a network allow-list: the proxy's Unix socket, the sandbox's only way out (core/sandbox/containment.py).
PROXY_MOUNT = Path("/run/daintree/proxy.sock")
