"""The shared part of the bundle import's steps: batched inserts and the comparison of a
re-imported row with the stored one (bundle-format.md: a stored row is never changed)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import models

from interchange.bundles.data import BundleData
from interchange.bundles.problems import Problems
from questions.cli import progress

BATCH = 2000  # rows per bulk_create
KEY_FIELDS = (
    "answer",
    "citation",
    "citation.doc_id",
    "citation.locator",
    "citation.quote",
    "action",
    "reason",
    "note",
)
# The id column of each file whose rows `_sync` matches by id (see rows.IdSpace).
ID_FIELDS = {
    "categories.csv": "category_id",
    "documents.csv": "doc_id",
    "questions.jsonl": "question_id",
    "models.csv": "model_id",
    "judges.csv": "judge_id",
}
REVIEW_HINT = (
    "the original key is immutable: corrections go through review "
    "(review queue, editor approval, new key edition), not re-import"
)


def short(value: Any) -> str:
    """Return repr(value), cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def differing(old: Any, new: Any) -> tuple[str, str]:
    """Return short forms of two differing values that show where they differ.

    Long strings that share a beginning are cut around their first differing character
    (with its position), so the two forms never look the same.
    """
    if not (isinstance(old, str) and isinstance(new, str)):
        return short(old), short(new)
    if len(repr(old)) <= 60 and len(repr(new)) <= 60:
        return repr(old), repr(new)
    i = len(os.path.commonprefix([old, new]))
    start = max(0, i - 20)

    def cut(s: str) -> str:
        part = s[start : i + 30]
        return ("..." if start else "") + repr(part) + ("..." if i + 30 < len(s) else "")

    return f"{cut(old)} (from character {i + 1})", cut(new)


class ImportBase:
    """One bundle import in progress: the validated data `d`, the problems `p` found while
    writing, the counts `created` and the `warnings`; the helpers every step uses."""

    def __init__(self, data: BundleData, problems: Problems, show: bool, user: Any) -> None:
        self.d, self.p, self.show, self.user = data, problems, show, user
        self.created: dict[str, int] = dict.fromkeys(
            ("benchmarks", *data.counts().keys(), "exclusions", "users"), 0
        )
        self.warnings = list(data.warnings)

    # --- helpers -------------------------------------------------------------------
    def _bulk(
        self,
        model: type[models.Model],
        objs: Sequence[models.Model],
        label: str,
        batch: int = BATCH,
    ) -> list[models.Model]:
        chunks = [objs[i : i + batch] for i in range(0, len(objs), batch)]
        made: list[models.Model] = []
        for chunk in progress(
            chunks,
            enabled=self.show and len(objs) > 5000,
            total=len(chunks),
            desc=f"writing {label}",
        ):
            made.extend(model.objects.bulk_create(chunk))
        self.created[label] += len(objs)
        return made

    def _compare(
        self,
        file: str,
        line: int,
        names: Sequence[str],
        stored: Sequence[Any],
        given: Sequence[Any],
        hint: str = "re-import adds rows; it never changes stored ones",
    ) -> bool:
        """Report the first field that differs; return True when equal."""
        for name, old, new in zip(names, stored, given, strict=True):
            if old != new:
                self.p.add(
                    file,
                    line,
                    name,
                    "differs from the stored value (stored {}, bundle {}); {}".format(
                        *differing(old, new), hint
                    ),
                )
                return False
        return True

    def _sync(
        self,
        file: str,
        names: Sequence[str],
        stored: dict[Any, Sequence[Any]],
        incoming: Iterable[tuple[Any, Sequence[Any], int]],
    ) -> list[Any]:
        """Compare rows whose key is stored; return the keys that are new.

        A new id of a file in `ID_FIELDS` that equals a stored one but for case is a
        problem (the reader's `IdSpace` rule, held across imports into one benchmark).
        """
        new = []
        field = ID_FIELDS.get(file)
        folded = {k.casefold(): k for k in stored if isinstance(k, str)} if field else {}
        for key, values, line in incoming:
            if key in stored:
                self._compare(file, line, names, stored[key], values)
            elif field and key.casefold() in folded:
                self.p.add(
                    file,
                    line,
                    field,
                    f"{key!r} differs from the stored {folded[key.casefold()]!r} only in case; "
                    "ids of one kind must differ in more than case",
                )
            else:
                new.append(key)
        return new
