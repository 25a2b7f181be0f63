"""The contract of a bundle part: how an app below `interchange` puts its own rows into a
bundle (types only; there is no registry).

Interchange sits above every app (as `dumpdata` does) and lists the parts it calls, in
order, in interchange.bundles.parts.BUNDLE_PARTS: review's history (review.bundle_history,
issue 21 item 7) and the blind human grades (scoring.human_bundle, issue 31 item 2). The
types live here, at the bottom, because the parts sit in two apps on different layers
(scoring below review) and must not import each other. Plain data crosses: dicts of JSON
values, user names, and callables handed in by interchange.

A part's contract:

- `files`: the bundle file names it owns (JSONL, one object per line).
- `export(benchmark, editions)`: {file name: [row dict, ...]} for the benchmark; `editions`
  are the published KeyEditions being exported (a row may only refer to those).
- `read(rows, known, problem)`: validate {file name: [(line, row dict), ...]} for the
  files present; report each problem with `problem(file, line, field, message)`; return
  a payload for `write` (ignored when any problem was reported anywhere in the bundle).
  `known` is a `Known`.
- `user_names(payload)`: every user name the payload refers to (interchange resolves them,
  creating missing ones inactive, before `write`).
- `write(payload, target, problem)`: write the rows inside the import's transaction and
  return {label: rows created}; a conflict with stored data is reported with `problem`
  (the import then writes nothing). `target` is a `Target`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Problem = Callable[[str, int, str, str], None]


@dataclass(frozen=True)
class Known:
    """What the rest of the bundle holds, for a part's `read`: question ids, edition names
    (`original` first, in chain order)."""

    question_ids: frozenset[str]
    editions: tuple[str, ...]


@dataclass(frozen=True)
class Target:
    """Where a part's `write` puts its rows: the benchmark, question id -> Question pk,
    `entry(edition, question_id)` -> the KeyEntry pk written in that edition for that
    question (None when there is none), and user name -> user."""

    benchmark: Any
    question_pk: dict[str, int]
    entry: Callable[[str, str], int | None]
    users: dict[str, Any]


class BundlePart(Protocol):
    """A bundle part (the module docstring gives the contract)."""

    files: tuple[str, ...]

    def export(self, benchmark: Any, editions: list[Any]) -> dict[str, list[dict[str, Any]]]: ...

    def read(
        self, rows: dict[str, list[tuple[int, dict[str, Any]]]], known: Known, problem: Problem
    ) -> Any: ...

    def user_names(self, payload: Any) -> set[str]: ...

    def write(self, payload: Any, target: Target, problem: Problem) -> dict[str, int]: ...
