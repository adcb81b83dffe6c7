"""The package logger: services report recoverable problems as warnings here; the CLI prints them."""

from __future__ import annotations

from collections.abc import Callable

_setup: Callable[[], None] | None = None


def on_first_warning(setup: Callable[[], None]) -> None:
    """Run `setup` (the CLI installs its handler) just before the first warning is logged: most commands warn
    of nothing, and importing logging would cost a short command a tenth of its start-up."""
    global _setup
    _setup = setup


def warn(message: str) -> None:
    """Report a recoverable problem (a skipped junk file, a recovered index) without failing."""
    import logging  # here: start-up speed (see above)

    global _setup
    setup, _setup = _setup, None
    if setup is not None:
        setup()
    logging.getLogger("daintree").warning(message)
