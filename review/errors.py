"""Domain errors of the review workflow; views and API translate them to HTTP (403/409/400)."""

from __future__ import annotations

from typing import Any

from questions.errors import DomainError, InvalidTransitionError, NotFoundError

__all__ = [
    "ConflictError",
    "DomainError",
    "HeldElsewhereError",
    "InvalidInputError",
    "InvalidTransitionError",
    "NotAllowedError",
    "NotFoundError",
]


class NotAllowedError(DomainError):
    """The acting user's roles do not allow this action (checked in the service, not only the UI)."""


class ConflictError(DomainError):
    """The form was based on a stale version of the item: nothing was written.

    `current_version` is the item's version now; `changes` lists what changed since
    (audit log entries after the submitted version), newest last.
    """

    def __init__(self, message: str, *, current_version: int, changes: list[dict[str, Any]]):
        super().__init__(message)
        self.current_version = current_version
        self.changes = changes


class HeldElsewhereError(InvalidTransitionError):
    """Someone else holds the item's live claim, so the holder's action (a citation check, a
    proposal) is refused: HTTP 409 like a lost claim race (the claim endpoint's answer), not
    403, because the user's roles allow it and the item's state is what stands in the way."""


class InvalidInputError(DomainError):
    """Input that breaks a rule of the action; `errors` maps field name -> messages."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


class RateLimitedError(DomainError):
    """Too many requests of one kind in the window; `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after
