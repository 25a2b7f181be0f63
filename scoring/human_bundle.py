"""The blind grading sample's part of a bundle (issue 31 item 2): `human_grades.jsonl`.

One line per sampled response, with the sample's fields repeated on every line and the
people's grades nested in it. Listed in interchange.bundles.parts.BUNDLE_PARTS, so the
bundle exporter, reader and importer carry it all-or-nothing with FILE:LINE problems.
Users by user name (a missing one is created inactive by interchange); key entries by the
name of the edition that holds them; times ISO 8601 with a UTC offset. Format:
docs/bundle-format.md ("Blind human grades").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.bundle_parts import Known, Problem, Target
from questions.models import Response
from scoring.human_models import HumanGrade, HumanSample, HumanSampleItem

FILE = "human_grades.jsonl"
SAMPLE_FIELDS = ("sample", "sample_edition", "seed", "disagree_share", "size")
STRATA = tuple(HumanSampleItem.Stratum.values)


class HumanGradesPart:
    """core.bundle_parts.BundlePart for blind human grading samples and their grades."""

    files = (FILE,)

    def export(self, benchmark: Any, editions: list[Any]) -> dict[str, list[dict[str, Any]]]:
        """Return {"human_grades.jsonl": rows}, samples oldest first, items by position
        ({} when there is none). A sample drawn from an edition not exported is left out."""
        names = {e.pk: e.name for e in editions}
        items = (
            HumanSampleItem.objects.filter(sample__benchmark=benchmark)
            .select_related("sample", "response__question", "response__model", "key_entry")
            .prefetch_related("grades__reviewer")
            .order_by("sample__created_at", "sample_id", "position")
        )
        rows = []
        for it in items:
            s = it.sample
            if s.edition_id not in names or it.key_entry.edition_id not in names:
                continue
            rows.append(
                {
                    "sample": s.name,
                    "sample_edition": names[s.edition_id],
                    "seed": s.seed,
                    "disagree_share": s.disagree_share,
                    "size": s.size,
                    "position": it.position,
                    "question_id": it.response.question.question_id,
                    "model_id": it.response.model.model_id,
                    "key_entry": names[it.key_entry.edition_id],
                    "stratum": it.stratum,
                    "stratum_population": it.stratum_population,
                    "stratum_drawn": it.stratum_drawn,
                    "grades": [
                        {
                            "reviewer": g.reviewer.get_username(),
                            "grade": g.grade,
                            "note": g.note,
                            "created_at": g.created_at.isoformat(),
                        }
                        for g in sorted(it.grades.all(), key=lambda g: (g.created_at, g.pk))
                    ],
                }
            )
        return {FILE: rows} if rows else {}

    def read(
        self, rows: dict[str, list[tuple[int, dict[str, Any]]]], known: Known, problem: Problem
    ) -> list[dict[str, Any]]:
        """Validate human_grades.jsonl (every problem reported); return its rows with `line`."""
        out = []
        first: dict[str, dict[str, Any]] = {}
        for line, row in rows.get(FILE, []):
            ok = _check_row(line, row, known, problem)
            name = row.get("sample")
            if ok and name in first:
                for f in SAMPLE_FIELDS:
                    if row[f] != first[name][f]:
                        problem(
                            FILE,
                            line,
                            f,
                            f"differs from line {first[name]['line']} of sample {name}",
                        )
                        ok = False
            elif ok:
                first[name] = {**row, "line": line}
            if ok:
                out.append({**row, "line": line})
        return out

    def user_names(self, payload: list[dict[str, Any]]) -> set[str]:
        return {g["reviewer"] for row in payload for g in row["grades"]}

    def write(
        self, payload: list[dict[str, Any]], target: Target, problem: Problem
    ) -> dict[str, int]:
        """Insert samples not stored yet with their items and grades. A stored sample of the
        same name, seed and edition is left as it is (re-import changes nothing); one that
        differs is a problem."""
        from questions.models import KeyEdition

        stored = {
            s.name: s
            for s in HumanSample.objects.filter(benchmark=target.benchmark).select_related(
                "edition"
            )
        }
        editions = {e.name: e for e in KeyEdition.objects.filter(benchmark=target.benchmark)}
        responses = {
            (q, m): pk
            for q, m, pk in Response.objects.filter(
                question__benchmark=target.benchmark
            ).values_list("question__question_id", "model__model_id", "pk")
        }
        samples: dict[str, HumanSample | None] = {}
        n_items = n_grades = 0
        for row in payload:
            name = row["sample"]
            if name not in samples:
                samples[name] = _sample_for(row, stored, editions, target, problem)
            sample = samples[name]
            if sample is None or name in stored:
                continue
            response = responses.get((row["question_id"], row["model_id"]))
            entry = target.entry(row["key_entry"], row["question_id"])
            if response is None:
                problem(
                    FILE,
                    row["line"],
                    "model_id",
                    f"no response of {row['model_id']} to {row['question_id']}",
                )
                continue
            if entry is None:
                problem(
                    FILE,
                    row["line"],
                    "key_entry",
                    f"edition {row['key_entry']} has no entry for {row['question_id']}",
                )
                continue
            scale = list(target.benchmark.grade_scale or [0, 1, 2])
            off = [g["grade"] for g in row["grades"] if g["grade"] not in scale]
            if off:
                problem(FILE, row["line"], "grades", f"grade {off[0]} is not on the scale {scale}")
                continue
            item = HumanSampleItem.objects.create(
                sample=sample,
                response_id=response,
                key_entry_id=entry,
                position=row["position"],
                stratum=row["stratum"],
                stratum_population=row["stratum_population"],
                stratum_drawn=row["stratum_drawn"],
            )
            HumanGrade.objects.bulk_create(
                HumanGrade(
                    item=item,
                    reviewer=target.users[g["reviewer"]],
                    grade=g["grade"],
                    note=g["note"],
                    created_at=g["created_at"],
                )
                for g in row["grades"]
            )
            n_items += 1
            n_grades += len(row["grades"])
        return {
            "human samples": sum(1 for n, s in samples.items() if s and n not in stored),
            "human sample items": n_items,
            "human grades": n_grades,
        }


def _sample_for(row, stored, editions, target, problem) -> HumanSample | None:
    """The sample a row belongs to: the stored one when identical, a new one, or None."""
    name = row["sample"]
    if name in stored:
        s = stored[name]
        if s.seed != row["seed"] or s.edition.name != row["sample_edition"]:
            problem(
                FILE, row["line"], "sample", f"sample {name} is stored with another seed or edition"
            )
            return None
        return s
    edition = editions.get(row["sample_edition"])
    if edition is None:
        problem(FILE, row["line"], "sample_edition", f"no key edition {row['sample_edition']}")
        return None
    return HumanSample.objects.create(
        benchmark=target.benchmark,
        name=name,
        edition=edition,
        seed=row["seed"],
        size=row["size"],
        disagree_share=row["disagree_share"],
    )


def _check_row(line: int, row: dict[str, Any], known: Known, problem: Problem) -> bool:
    """Report every problem of one line; True when it has none."""
    count = [0]

    def bad(f: str, message: str) -> None:
        count[0] += 1
        problem(FILE, line, f, message)

    for f in ("sample", "sample_edition", "question_id", "model_id", "key_entry"):
        if not isinstance(row.get(f), str) or not row.get(f):
            bad(f, "must be a non-empty string")
    for f in ("seed", "size", "position", "stratum_population", "stratum_drawn"):
        v = row.get(f)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            bad(f, "must be a whole number >= 0")
    share = row.get("disagree_share")
    if not isinstance(share, int | float) or isinstance(share, bool) or not 0 <= share <= 1:
        bad("disagree_share", "must be a number between 0 and 1")
    if row.get("stratum") not in STRATA:
        bad("stratum", f"must be one of {', '.join(STRATA)}")
    if isinstance(row.get("question_id"), str) and row["question_id"] not in known.question_ids:
        bad("question_id", f"unknown question {row['question_id']}")
    for f in ("sample_edition", "key_entry"):
        if isinstance(row.get(f), str) and row[f] not in known.editions:
            bad(f, f"unknown key edition {row[f]}")
    grades = row.get("grades")
    if not isinstance(grades, list):
        bad("grades", "must be a list")
        grades = []
    for k, g in enumerate(grades):
        where = f"grades[{k}]"
        if not isinstance(g, dict):
            bad(where, "must be an object")
            continue
        if not isinstance(g.get("reviewer"), str) or not g.get("reviewer"):
            bad(f"{where}.reviewer", "must be a user name")
        if not isinstance(g.get("grade"), int) or isinstance(g.get("grade"), bool):
            bad(f"{where}.grade", "must be a whole number on the grade scale")
        if not isinstance(g.get("note", ""), str):
            bad(f"{where}.note", "must be text")
        g.setdefault("note", "")
        try:
            when = datetime.fromisoformat(g.get("created_at") or "")
            if when.tzinfo is None:
                bad(f"{where}.created_at", "needs a UTC offset")
            g["created_at"] = when
        except (TypeError, ValueError):
            bad(f"{where}.created_at", "must be an ISO 8601 time")
    return count[0] == 0
