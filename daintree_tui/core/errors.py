"""Errors that carry their CLI exit code.

Exit 2 means the input was rejected before any side effect; exit 1 means the operation was refused or failed
because of the repository's state (docs/design.md section 6).
"""

from __future__ import annotations


class DaintreeError(Exception):
    """Base of every error the services raise on purpose; the message is one line for a person."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(DaintreeError):
    """Bad input, rejected before any side effect (exit 2)."""

    exit_code = 2


class OperationError(DaintreeError):
    """Refused or failed because of the repository's state (exit 1)."""

    exit_code = 1


class ConfigError(InputError):
    """A configuration value is invalid; the message names the key."""
