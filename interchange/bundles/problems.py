"""Collect every problem of a bundle as `FILE:LINE: FIELD: message`, up to a cap."""

from __future__ import annotations

from django.conf import settings


class BundleError(Exception):
    """A bundle was refused; `problems` holds one `FILE:LINE: FIELD: message` per item."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Problems:
    """An ordered, capped list of problems (`SNAGLIST_IMPORT_ERROR_CAP`, default 200)."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = (
            cap if cap is not None else int(getattr(settings, "SNAGLIST_IMPORT_ERROR_CAP", 200))
        )
        self.items: list[str] = []
        self.total = 0

    def add(self, file: str, line: int, field: str, message: str) -> None:
        self.total += 1
        if len(self.items) < self.cap:
            self.items.append(f"{file}:{line}: {field}: {message}")

    def extend(self, lines: list[str]) -> None:
        for item in lines:
            self.total += 1
            if len(self.items) < self.cap:
                self.items.append(item)

    def __bool__(self) -> bool:
        return self.total > 0

    def lines(self) -> list[str]:
        extra = self.total - len(self.items)
        if extra > 0:
            return [*self.items, f"... and {extra} more problems not shown (cap {self.cap})"]
        return list(self.items)

    def raise_if_any(self) -> None:
        if self:
            raise BundleError(self.lines())
