"""The services layer: where core and sessions meet (queue, bake-offs, approvals and policy, disk hygiene, the
session observer), and the `Services` container that wires them once for the CLI, the dashboard and the tests.

Imports core and sessions only; never the dashboard or the CLI.
"""

from daintree_tui.services.container import Services

__all__ = ["Services"]
