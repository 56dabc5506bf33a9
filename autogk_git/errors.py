"""One error base class; every user-facing error names the next command to run."""
from __future__ import annotations


class AutogkError(Exception):
    """A known failure: exits 1 with the message and a hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\nhint: {self.hint}"


class ConfigError(AutogkError):
    """`.autogk.toml` is missing, malformed or has a bad key or value."""


class NotAProject(AutogkError):
    """The directory is not an autogk project."""


class GitError(AutogkError):
    """A git command failed; the message shows the command, exit code and output."""


class TargetError(AutogkError):
    """A target's files are missing or invalid."""


class InputDataNeeded(TargetError):
    """A definition has inputs that random data cannot stand for."""


class LockHeld(AutogkError):
    """Another autogk loop holds the repository lock."""


class BenchError(AutogkError):
    """The benchmark infrastructure (not the kernel) failed."""


class AgentError(AutogkError):
    """An agent could not produce a proposal."""
