"""Errors a user can act on, each carrying the exit code the CLI returns."""
from __future__ import annotations

EXIT_OK = 0
EXIT_VERIFICATION_FAILED = 1
EXIT_BAD_INPUT = 2


class CodemodError(Exception):
    exit_code = EXIT_BAD_INPUT


class BadInput(CodemodError):
    """The op, the tree or a file is not what the tool can work on (exit 2)."""


class VerificationFailed(CodemodError):
    """The rewritten tree does not pass the codegen or the compiler (exit 1)."""

    exit_code = EXIT_VERIFICATION_FAILED


class NotBypassable(BadInput):
    """The op exists but the tool cannot bypass it; `reason` is the short form `codemod ops` lists."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
