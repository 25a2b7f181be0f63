"""Read and validate every file of a bundle into plain Python rows (no database access).

All problems are collected (capped), each as `FILE:LINE: FIELD: message`; `read_bundle`
raises BundleError when there is any, so the importer only ever sees a valid bundle.
Checks against what the database already holds (re-import) are the importer's.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from interchange.bundles.data import BundleData, Citation, KeyRow
from interchange.bundles.history_read import read_history
from interchange.bundles.problems import Problems
from interchange.bundles.rows import (
    ACTIONS,
    BACKENDS,
    DOC_STATUSES,
    GRADE_MAX,
    GRADE_MIN,
    ISO_DATE,
    MAX,
    ORIGINAL,
    REASONS,
    ROLES,
    SLUG,
    VERDICTS,
    IdSpace,
    Row,
    count_rows,
    iter_csv,
    iter_jsonl,
    loads_strict,
    nul_path,
    surrogate_message,
    surrogate_path,
    type_name,
)
from interchange.bundles.source import BundleSource, decode_lines


def read_bundle(
    source: BundleSource, *, show_progress: bool = False, cap: int | None = None
) -> BundleData:
    """Read and validate a whole bundle; raise BundleError listing every problem."""
    p = Problems(cap)
    b = BundleData()
    _manifest(source, p, b)
    if source.exists("categories.csv"):
        _categories(source, p, b)
    if source.exists("documents.csv"):
        _documents(source, p, b)
    if source.exists("sections.jsonl"):
        _sections(source, p, b)
    if source.exists("questions.jsonl"):
        _questions(source, p, b)
    else:
        p.add("questions.jsonl", 0, "file", "required file missing")
    if source.exists("models.csv"):
        _models(source, p, b)
    if source.exists("judges.csv"):
        _judges(source, p, b)
    if source.exists("responses.jsonl"):
        _responses(source, p, b, show_progress)
    if source.exists("corrections.jsonl"):
        _corrections(source, p, b)
    _empty_editions(p, b)
    if source.exists("grades.jsonl"):
        _grades(source, p, b, show_progress)
    if source.exists("audits.jsonl"):
        _audits(source, p, b)
    read_history(source, p, b)
    _counts(source, p, b)
    p.raise_if_any()
    return b


def _manifest(source: BundleSource, p: Problems, b: BundleData) -> None:
    name = "manifest.json"
    if not source.exists(name):
        p.add(name, 0, "file", "required file missing")
        return
    lines = decode_lines(name, source.read_bytes(name), p)
    if lines is None:
        return
    try:
        manifest = loads_strict("\n".join(t for _, t in lines))
    except ValueError as exc:
        line = getattr(exc, "lineno", 1)
        p.add(name, line, "json", f"broken JSON: {getattr(exc, 'msg', exc)}")
        return
    if not isinstance(manifest, dict):
        p.add(name, 1, "json", f"must be a JSON object, not {type_name(manifest)}")
        return
    where = nul_path(manifest)
    if where is not None:
        # The manifest is stored whole (PostgreSQL jsonb cannot hold U+0000 either).
        p.add(name, 1, where, "contains a NUL character (U+0000)")
        return
    lone = surrogate_path("\n".join(t for _, t in lines), manifest)
    if lone is not None:
        p.add(name, 1, lone[0], surrogate_message(lone[1]))
        return
    row = Row(p, name, 1, manifest)
    bench = row.text("name", empty=False, max_length=100)
    if bench is not None and not SLUG.match(bench):
        row.error("name", f"{bench!r} must be a slug (letters, digits, - and _)")
    b.name = bench or ""
    # `counts` describes these files, not the benchmark: checked by _counts, not stored
    # (an export writes its own).
    b.manifest = {k: v for k, v in manifest.items() if k != "counts"}
    counts = manifest.get("counts", {})
    if not isinstance(counts, dict) or any(
        type(n) is not int or n < 0 or "/" in f or "\\" in f for f, n in counts.items()
    ):
        row.error(
            "counts",
            'must be an object of file name to rows, e.g. {"questions.jsonl": 46}, each a '
            "whole number of at least 0",
        )
    else:
        b.declared_counts = counts
    b.version = row.text("version", required=False, max_length=50) or ""
    b.description = row.text("description", required=False) or ""
    b.license = row.text("license", required=False) or ""
    scale = manifest.get("grade_scale", [0, 1, 2])
    if (
        not isinstance(scale, list)
        or len(scale) < 2
        or any(type(g) is not int for g in scale)
        or len(set(scale)) != len(scale)
    ):
        row.error(
            "grade_scale",
            "must be a list of at least two distinct integers (wrong ... right), e.g. [0, 1, 2]",
        )
    elif outside := [g for g in scale if not GRADE_MIN <= g <= GRADE_MAX]:
        # Grades are stored in a smallint column (scoring.Grade.grade); a larger number
        # crashed the import with the database's DataError.
        row.error(
            "grade_scale",
            f"{outside[0]} is outside the range a grade can hold ({GRADE_MIN} to {GRADE_MAX})",
        )
    else:
        b.grade_scale = list(scale)
    corrected = row.text("corrected_edition", required=False, empty=False, max_length=100)
    if corrected:
        if not SLUG.match(corrected) or corrected == ORIGINAL:
            row.error("corrected_edition", f"{corrected!r} must be a slug other than 'original'")
        else:
            b.corrected_edition = corrected
    editions = manifest.get("editions", [])
    if not isinstance(editions, list) or any(
        not isinstance(e, dict) or not isinstance(e.get("name"), str) for e in editions
    ):
        row.error("editions", "must be a list of objects with a 'name' (and 'note')")
        editions = []
    for entry in editions:
        ename = entry["name"]
        if not SLUG.match(ename) or ename == ORIGINAL:
            row.error("editions", f"{ename!r} must be a slug other than 'original'")
            continue
        note = entry.get("note") or ""
        if not isinstance(note, str):
            row.error("editions", f"note of {ename!r} must be a string")
            note = ""
        b.editions.setdefault(ename, {"note": note, "entries": {}})


def _counts(source: BundleSource, p: Problems, b: BundleData) -> None:
    """The manifest's `counts` must be the files' rows (`count_rows`): a file cut short in
    transfer, or rows added or dropped after the manifest was written, refuses the bundle
    with both numbers."""
    for name, declared in b.declared_counts.items():
        actual = count_rows(name, source.read_bytes(name)) if source.exists(name) else 0
        if actual is None or actual == declared:
            continue
        where = f"{name} has {actual}" if source.exists(name) else f"there is no {name}"
        p.add(
            "manifest.json",
            1,
            f"counts.{name}",
            f"the manifest says {declared} rows but {where}; refused (a file cut short, or "
            "rows added or removed after the manifest was written?)",
        )


def _categories(source: BundleSource, p: Problems, b: BundleData) -> None:
    space = IdSpace()
    for row in iter_csv(source, "categories.csv", p, ("category_id", "name")):
        cid = row.ident("category_id")
        name = row.text("name", empty=False, max_length=MAX["category_name"])
        if cid is None or space.clash(row, "category_id", cid):
            continue
        if cid in b.categories:
            row.error("category_id", f"duplicate {cid!r} (first on line {b.categories[cid][1]})")
            continue
        b.categories[cid] = (name or "", row.line)


def _documents(source: BundleSource, p: Problems, b: BundleData) -> None:
    name = "documents.csv"
    optional = ("short_title", "kind", "edition", "published", "status", "superseded_by", "url")
    space = IdSpace()
    for row in iter_csv(source, name, p, ("doc_id", "title"), optional):
        doc_id = row.ident("doc_id")
        values = {
            "title": row.text("title", empty=False, max_length=MAX["title"]),
            "short_title": row.text("short_title", required=False, max_length=MAX["short_title"]),
            "kind": row.text("kind", required=False, max_length=MAX["kind"]),
            "edition": row.text("edition", required=False, max_length=MAX["edition"]),
            "url": row.text("url", required=False, max_length=MAX["url"]),
            "superseded_by": row.text("superseded_by", required=False, max_length=MAX["id"]),
            "line": row.line,
        }
        url = values["url"] or ""
        if url and not url.lower().startswith(("http://", "https://")):
            # Shown as a link on the review page: a javascript: URL would run on click.
            row.error("url", f"{url[:60]!r} is not an http(s) URL")
        status = row.data.get("status") or "current"
        if status not in DOC_STATUSES:
            row.error("status", f"{status!r} is not one of {', '.join(DOC_STATUSES)}")
        values["status"] = status
        published = row.data.get("published") or ""
        values["published"] = None
        if published:
            try:
                if not ISO_DATE.match(published):
                    raise ValueError
                values["published"] = date.fromisoformat(published)
            except ValueError:
                row.error("published", f"{published!r} is not an ISO date (YYYY-MM-DD)")
        if doc_id is None or space.clash(row, "doc_id", doc_id):
            continue
        if doc_id in b.documents:
            row.error(
                "doc_id", f"duplicate {doc_id!r} (first on line {b.documents[doc_id]['line']})"
            )
            continue
        b.documents[doc_id] = values
    for doc_id, values in b.documents.items():
        target = values["superseded_by"]
        if target and target not in b.documents:
            p.add(name, values["line"], "superseded_by", f"unknown document {target!r}")
        elif target == doc_id:
            p.add(name, values["line"], "superseded_by", "a document cannot supersede itself")


def _sections(source: BundleSource, p: Problems, b: BundleData) -> None:
    positions: dict[str, int] = {}
    for row in iter_jsonl(source, "sections.jsonl", p):
        doc_id = row.ident("doc_id")
        locator = row.text("locator", empty=False, max_length=MAX["locator"])
        heading = row.text("heading", required=False, null=True)
        text = row.text("text", required=False, null=True)
        if doc_id is not None and doc_id not in b.documents:
            row.error("doc_id", f"unknown document {doc_id!r}")
        if not row.ok:
            continue
        key = (doc_id, locator)
        if key in b.sections:
            row.error(
                "locator",
                f"duplicate {locator!r} of {doc_id!r} (first on line {b.sections[key]['line']})",
            )
            continue
        positions[doc_id] = positions.get(doc_id, 0) + 1
        b.sections[key] = {
            "heading": heading,
            "text": text,
            "position": positions[doc_id],
            "line": row.line,
        }


def _citation(row: Row, b: BundleData, name: str = "citation") -> Citation | None:
    value = row.data.get(name)
    if value is None:
        return Citation()
    if not isinstance(value, dict):
        row.error(name, f"must be an object or null, not {type_name(value)}")
        return None
    sub = Row(row.problems, row.file, row.line, value, prefix=f"{name}.")
    doc_id = sub.text("doc_id", empty=False, max_length=MAX["id"])
    locator = sub.text("locator", max_length=MAX["locator"])
    quote = sub.text("quote", required=False, null=True)
    if not sub.ok:
        row.ok = False
        return None
    if doc_id not in b.documents:
        row.error(f"{name}.doc_id", f"unknown document {doc_id!r}")
        return None
    return Citation(True, doc_id, locator, quote)


def _questions(source: BundleSource, p: Problems, b: BundleData) -> None:
    space = IdSpace()
    for row in iter_jsonl(source, "questions.jsonl", p):
        qid = row.ident("question_id")
        cid = row.text("category_id", required=False, null=True, max_length=MAX["id"])
        text = row.text("text", empty=False)
        answer = row.text("answer", empty=False)  # a blank key answer grades nothing
        citation = _citation(row, b)
        if cid and cid not in b.categories:
            row.error("category_id", f"unknown category {cid!r}")
        if qid is None or space.clash(row, "question_id", qid):
            continue
        if qid in b.questions:
            row.error(
                "question_id", f"duplicate {qid!r} (first on line {b.questions[qid]['line']})"
            )
            continue
        # Known even when invalid, so that rows pointing at it do not cascade into errors.
        b.questions[qid] = {"category_id": cid or "", "text": text, "line": row.line}
        if row.ok:
            b.original[qid] = KeyRow(qid, answer, citation, line=row.line)


def _models(source: BundleSource, p: Problems, b: BundleData) -> None:
    space = IdSpace()
    for row in iter_csv(source, "models.csv", p, ("model_id", "name"), ("vendor",)):
        mid = row.ident("model_id", MAX["model_id"])
        name = row.text("name", empty=False, max_length=MAX["model_name"])
        vendor = row.text("vendor", required=False, max_length=MAX["vendor"])
        if mid is None or space.clash(row, "model_id", mid):
            continue
        if mid in b.models:
            row.error("model_id", f"duplicate {mid!r} (first on line {b.models[mid]['line']})")
            continue
        b.models[mid] = {"name": name, "vendor": vendor, "line": row.line}


def _judges(source: BundleSource, p: Problems, b: BundleData) -> None:
    name = "judges.csv"
    optional = ("vendor", "backend", "model", "prompt_version")
    space = IdSpace()
    for row in iter_csv(source, name, p, ("judge_id", "name", "role"), optional):
        jid = row.ident("judge_id", MAX["judge_id"])
        values = {
            "name": row.text("name", empty=False, max_length=MAX["model_name"]),
            "vendor": row.text("vendor", required=False, max_length=MAX["vendor"]),
            "role": row.choice("role", ROLES),
            "backend": row.choice("backend", BACKENDS, required=False),
            "model": row.text("model", required=False, max_length=MAX["model"]),
            "prompt_version": row.data.get("prompt_version") or "v1",
            "line": row.line,
        }
        if len(values["prompt_version"]) > MAX["prompt_version"]:
            row.error("prompt_version", f"longer than {MAX['prompt_version']} characters")
        if jid is None or space.clash(row, "judge_id", jid):
            continue
        if jid in b.judges:
            row.error("judge_id", f"duplicate {jid!r} (first on line {b.judges[jid]['line']})")
            continue
        b.judges[jid] = values
    for role in ROLES:
        by_vendor: dict[str, list[str]] = {}
        for jid, values in b.judges.items():
            if values["role"] == role and values["vendor"]:
                by_vendor.setdefault(values["vendor"].casefold(), []).append(jid)
        for vendor, ids in by_vendor.items():
            if len(ids) > 1:
                consequence = (
                    " (rule 4: their agreeing adverse verdicts go to the review queue, "
                    "they never exclude a question by themselves)"
                    if role == "auditor"
                    else ""
                )
                b.warnings.append(
                    f"{name}: warning: {role}s {', '.join(ids)} are from the same vendor "
                    f"({vendor}); methodology asks for {role}s from different vendors" + consequence
                )


def _responses(source: BundleSource, p: Problems, b: BundleData, show: bool) -> None:
    for row in iter_jsonl(source, "responses.jsonl", p, show):
        qid = row.ident("question_id")
        mid = row.ident("model_id", MAX["model_id"])
        text = row.text("text")
        if qid is not None and qid not in b.questions:
            row.error("question_id", f"unknown question {qid!r}")
        if mid is not None and mid not in b.models:
            row.error("model_id", f"unknown model {mid!r}")
        if qid is None or mid is None:
            continue
        key = (qid, mid)
        if key in b.responses:
            row.error(
                "model_id",
                f"duplicate response of {mid!r} to {qid!r} (first on line {b.responses[key][1]})",
            )
            continue
        b.responses[key] = (text, row.line)


def _corrections(source: BundleSource, p: Problems, b: BundleData) -> None:
    name = "corrections.jsonl"
    for row in iter_jsonl(source, name, p):
        qid = row.ident("question_id")
        action = row.choice("action", ACTIONS)
        answer = row.text(
            "answer",
            required=action == "correct",
            null=action == "remove",
            empty=action != "correct",
        )
        citation = _citation(row, b)
        reason = row.choice("reason", REASONS)
        note = row.text("note", required=False, null=True)
        edition = row.text("edition", required=False, null=True, max_length=100)
        edition = edition or b.corrected_edition
        if not SLUG.match(edition) or edition == ORIGINAL:
            row.error("edition", f"{edition!r} must be a slug other than 'original'")
        if qid is not None and qid not in b.questions:
            row.error("question_id", f"unknown question {qid!r}")
        if not row.ok:
            continue
        # Chain order: the manifest's `editions` list, then order of first appearance.
        b.editions.setdefault(edition, {"note": "", "entries": {}})
        entries = b.editions[edition]["entries"]
        if qid in entries:
            row.error(
                "question_id",
                f"duplicate correction of {qid!r} in edition {edition!r} "
                f"(first on line {entries[qid].line})",
            )
            continue
        entries[qid] = KeyRow(
            qid,
            answer or "",
            citation,
            removed=action == "remove",
            reason=reason,
            note=note or "",
            line=row.line,
        )


def _empty_editions(p: Problems, b: BundleData) -> None:
    """A key edition after the original holds at least one correction or removal (review
    refuses to publish an empty one); one named in the manifest with none is an error.
    Skipped when corrections.jsonl had errors: its rejected rows may be the edition's."""
    if any(item.startswith("corrections.jsonl:") for item in p.items):
        return
    for name, edition in b.editions.items():
        if not edition["entries"]:
            p.add(
                "manifest.json",
                1,
                "editions",
                f"key edition {name!r} has no correction or removal in corrections.jsonl",
            )


def _edition_name(row: Row, b: BundleData) -> str | None:
    edition = row.text("edition", required=False, null=True, max_length=100) or ORIGINAL
    if edition != ORIGINAL and edition not in b.editions:
        known = ", ".join([ORIGINAL, *b.editions])
        row.error("edition", f"unknown key edition {edition!r} (this bundle has: {known})")
        return None
    return edition


def _prompt_version(row: Row, judge: dict[str, Any] | None) -> str | None:
    pv = row.text(
        "prompt_version", required=False, null=True, empty=False, max_length=MAX["prompt_version"]
    )
    if pv is None:
        return None
    return pv or (judge["prompt_version"] if judge else "v1")


def _grades(source: BundleSource, p: Problems, b: BundleData, show: bool) -> None:
    name = "grades.jsonl"
    seen: dict[tuple[str, ...], int] = {}
    scale = set(b.grade_scale)
    for row in iter_jsonl(source, name, p, show):
        qid = row.ident("question_id")
        mid = row.ident("model_id", MAX["model_id"])
        jid = row.ident("judge_id", MAX["judge_id"])
        judge = b.judges.get(jid) if jid is not None else None
        if jid is not None and judge is None:
            row.error("judge_id", f"unknown judge {jid!r}")
        elif judge is not None and judge["role"] != "judge":
            row.error("judge_id", f"{jid!r} is an auditor, not a judge")
        if qid is not None and mid is not None and (qid, mid) not in b.responses:
            if qid not in b.questions:
                row.error("question_id", f"unknown question {qid!r}")
            elif mid not in b.models:
                row.error("model_id", f"unknown model {mid!r}")
            else:
                row.error("model_id", f"no response of model {mid!r} to question {qid!r}")
        if "grade" not in row.data:
            row.error("grade", "required field missing (null when unparsed)")
        grade = row.data.get("grade")
        if grade is not None and (type(grade) is not int or grade not in scale):
            shown = grade if type(grade) in (int, float) else type_name(grade)
            row.error("grade", f"{shown} is not on the grade scale {b.grade_scale} (or null)")
        values = {
            "rationale": row.text("rationale", required=False, null=True),
            "flag": row.boolean("flag"),
            "flag_reason": row.text("flag_reason", required=False, null=True),
            "raw_output": row.text("raw_output", required=False, null=True),
            "stop_reason": row.text(
                "stop_reason", required=False, null=True, max_length=MAX["stop_reason"]
            ),
        }
        edition = _edition_name(row, b)
        pv = _prompt_version(row, judge)
        if not row.ok:
            continue
        key = (qid, mid, jid, edition, pv)
        if key in seen:
            row.error(
                "judge_id",
                f"duplicate grade of {qid!r}/{mid!r} by {jid!r} (first on line {seen[key]})",
            )
            continue
        seen[key] = row.line
        b.grades.append(
            {
                "question_id": qid,
                "model_id": mid,
                "judge_id": jid,
                "edition": edition,
                "prompt_version": pv,
                "grade": grade,
                "line": row.line,
                **values,
            }
        )


def _audits(source: BundleSource, p: Problems, b: BundleData) -> None:
    seen: dict[tuple[str, ...], int] = {}
    for row in iter_jsonl(source, "audits.jsonl", p):
        qid = row.ident("question_id")
        jid = row.ident("judge_id", MAX["judge_id"])
        judge = b.judges.get(jid) if jid is not None else None
        if jid is not None and judge is None:
            row.error("judge_id", f"unknown auditor {jid!r}")
        elif judge is not None and judge["role"] != "auditor":
            row.error("judge_id", f"{jid!r} is a judge, not an auditor")
        if qid is not None and qid not in b.questions:
            row.error("question_id", f"unknown question {qid!r}")
        verdict = row.choice("verdict", VERDICTS)
        rationale = row.text("rationale", required=False, null=True)
        raw_output = row.text("raw_output", required=False, null=True)
        edition = _edition_name(row, b)
        pv = _prompt_version(row, judge)
        if not row.ok:
            continue
        key = (qid, jid, edition, pv)
        if key in seen:
            row.error(
                "judge_id", f"duplicate verdict on {qid!r} by {jid!r} (first on line {seen[key]})"
            )
            continue
        seen[key] = row.line
        b.audits.append(
            {
                "question_id": qid,
                "judge_id": jid,
                "edition": edition,
                "prompt_version": pv,
                "verdict": verdict,
                "rationale": rationale,
                "raw_output": raw_output,
                "line": row.line,
            }
        )
