"""Domain errors of the data layer: raised by services and selectors, never HTTP-aware.

Callers (views, API, management commands) translate them: a command maps `NotFoundError`
and `DomainError` to exit 1 and `AmbiguousError` to a usage error (exit 2, cli.md).
"""

from __future__ import annotations


class DomainError(Exception):
    """An action that the rules of the benchmark do not allow."""


class NotFoundError(DomainError):
    """A named benchmark, edition, document or passage does not exist."""


class AmbiguousError(DomainError):
    """A name was left out where several candidates exist; `choices` lists them."""

    def __init__(self, message: str, choices: list[str]) -> None:
        super().__init__(message)
        self.choices = choices


class ImmutableEditionError(DomainError):
    """The key edition is published: its rows are never changed (methodology rule 7)."""


class InvalidTransitionError(DomainError):
    """The object is not in a state that allows this action (e.g. publishing twice)."""
