"""The package logger: services report recoverable problems as warnings here; the CLI prints them."""

from __future__ import annotations

import logging

logger = logging.getLogger("daintree")


def warn(message: str) -> None:
    """Report a recoverable problem (a skipped junk file, a recovered index) without failing."""
    logger.warning(message)
