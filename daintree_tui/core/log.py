"""The package logger: services report recoverable problems as warnings here; the CLI prints them.

`suppressed(...)` is `contextlib.suppress` that leaves a trace: with debugging on (`daintree --verbose`, or
`DAINTREE_LOG=FILE`), every exception it swallows is logged at debug level with its site and traceback. Off (the
default) it costs what `contextlib.suppress` does, and `logging` is not imported at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import TracebackType

_setup: Callable[[], None] | None = None
_debug = False


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


def set_debug(on: bool) -> None:
    """Log what `suppressed` swallows (the CLI turns this on for `--verbose` and `DAINTREE_LOG`, after it has set
    up where the records go)."""
    global _debug
    _debug = on


def debugging() -> bool:
    return _debug


class suppressed:  # lower case, as the `contextlib.suppress` it replaces
    """Swallow the given exceptions, as `contextlib.suppress` does, and log each one at debug level when
    debugging is on: the site (file, line, function) and the traceback.

    Used wherever an exception is expected and harmless often enough that it must not fail the operation (a file
    gone between a listing and its open, a process already dead, a consumer's bug that must not stop a stream),
    so that when it is not harmless, `daintree --verbose` shows it.
    """

    __slots__ = ("_exceptions",)

    def __init__(self, *exceptions: type[BaseException]) -> None:
        self._exceptions = exceptions

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc_type is None or not issubclass(exc_type, self._exceptions):
            return False
        if _debug and exc is not None:
            _log_suppressed(exc, tb)
        return True


def _log_suppressed(exc: BaseException, tb: TracebackType | None) -> None:
    import logging

    # The traceback's first frame is the one holding the `with suppressed(...)`: that is the site.
    site = "?"
    if tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if path.startswith(package + os.sep):
            path = os.path.relpath(path, os.path.dirname(package))
        site = f"{path}:{tb.tb_lineno} in {code.co_name}"
    logging.getLogger("daintree.debug").debug("suppressed %s at %s: %s", type(exc).__name__, site, exc,
                                        exc_info=(type(exc), exc, tb))
