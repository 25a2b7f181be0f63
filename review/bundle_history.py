"""Review's part of a bundle (issue 21 item 7): `review_items.jsonl`, one review item per
line with its evidence, citation checks and proposals nested in it.

Interchange, the layer above review (as `dumpdata` sits above every app), calls `PART` on
export and import (interchange.bundles.parts.BUNDLE_PARTS); review never imports
interchange. Users by user name; key entries by the
name of the edition that holds them (the entry of the item's question in that edition);
times as ISO 8601 with a UTC offset. Format: docs/bundle-format.md ("Review history").
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from core.bundle_parts import Known, Problem, Target
from questions.models import KeyEntry
from review.models import CitationCheck, Evidence, Proposal, ReviewItem, Source

FILE = "review_items.jsonl"
USERNAME_MAX = 150
TIMES = ("claimed_at", "claim_expires_at", "created_at", "updated_at", "closed_at")
ITEM_TEXT = ("reasons",)
CHECK_CHOICES = {
    "locator_exists": CitationCheck.YesNo.values,
    "supports": CitationCheck.Supports.values,
    "edition_in_force": CitationCheck.InForce.values,
    "amended": CitationCheck.Amended.values,
}
CHECK_TEXT = ("note", "source_url")
PROPOSAL_TEXT = (
    "answer",
    "citation_doc_id",
    "citation_locator",
    "citation_quote",
    "note",
    "decision_comment",
)
ITEM_FIELDS = (
    "source",
    "sources",
    "priority",
    "reasons",
    "status",
    "version",
    "claimed_at",
    "claim_expires_at",
    "closed_at",
)
PROPOSAL_FIELDS = ("action", "reason", "status", "decided_at")
BATCH = 1000
TEXT_MAX = {"citation_doc_id": 100, "citation_locator": 100, "source_url": 1000}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


class ReviewHistoryPart:
    """Review items, evidence, citation checks and proposals as a bundle part.

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

    files = (FILE,)

    # --- export ------------------------------------------------------------------------
    def export(self, benchmark: Any, editions: list[Any]) -> dict[str, list[dict[str, Any]]]:
        """Return {"review_items.jsonl": rows}, items oldest first ({} when there are none).

        A key entry in an edition not exported (a draft) is written as null."""
        names = {e.pk: e.name for e in editions}
        items = list(
            ReviewItem.objects.filter(benchmark=benchmark)
            .select_related("question", "claimed_by")
            .prefetch_related("evidence", "checks__reviewer", "checks__key_entry")
            .prefetch_related("proposals__author", "proposals__decided_by")
            .prefetch_related("proposals__base_entry", "proposals__key_entry")
            .order_by("created_at", "id")
        )
        if not items:
            return {}

        def entry(e: KeyEntry | None) -> str | None:
            return names.get(e.edition_id) if e is not None else None

        def user(u: Any) -> str | None:
            return u.get_username() if u is not None else None

        rows = []
        for it in items:
            row: dict[str, Any] = {
                "question_id": it.question.question_id,
                "source": it.source,
                "sources": it.sources,
                "priority": it.priority,
                "reasons": it.reasons,
                "status": it.status,
                "claimed_by": user(it.claimed_by),
                "version": it.version,
                **{t: _iso(getattr(it, t)) for t in TIMES},
            }
            row["evidence"] = [
                {
                    "kind": e.kind,
                    "detail": e.detail,
                    "fingerprint": e.fingerprint,
                    "created_at": _iso(e.created_at),
                }
                for e in sorted(it.evidence.all(), key=lambda e: (e.created_at, e.pk))
            ]
            row["citation_checks"] = [
                {
                    "reviewer": user(c.reviewer),
                    "key_entry": entry(c.key_entry),
                    **{f: getattr(c, f) for f in (*CHECK_CHOICES, *CHECK_TEXT)},
                    "created_at": _iso(c.created_at),
                }
                for c in sorted(it.checks.all(), key=lambda c: (c.created_at, c.pk))
            ]
            row["proposals"] = [
                {
                    "author": user(p.author),
                    "action": p.action,
                    "base_entry": entry(p.base_entry),
                    **{f: getattr(p, f) for f in PROPOSAL_TEXT},
                    "reason": p.reason,
                    "status": p.status,
                    "decided_by": user(p.decided_by),
                    "decided_at": _iso(p.decided_at),
                    "key_entry": entry(p.key_entry),
                    "created_at": _iso(p.created_at),
                }
                for p in sorted(it.proposals.all(), key=lambda p: (p.created_at, p.pk))
            ]
            rows.append(row)
        return {FILE: rows}

    # --- read --------------------------------------------------------------------------
    def read(
        self, rows: dict[str, list[tuple[int, dict[str, Any]]]], known: Known, problem: Problem
    ) -> list[dict[str, Any]]:
        """Validate review_items.jsonl; return its rows (with `line`) as typed values."""
        out = []
        open_at: dict[str, int] = {}
        for line, data in rows.get(FILE, []):
            check = _Checker(problem, line, known)
            item = check.item(data)
            if item is None:
                continue
            if item["status"] not in ReviewItem.CLOSED:
                qid = item["question_id"]
                if qid in open_at:
                    check.error(
                        "status",
                        f"{qid!r} already has an item that is not closed (line {open_at[qid]});"
                        " a question has at most one",
                    )
                    continue
                open_at[qid] = line
            out.append({**item, "line": line})
        return out

    def user_names(self, payload: list[dict[str, Any]]) -> set[str]:
        names = set()
        for item in payload:
            names.add(item["claimed_by"])
            names |= {c["reviewer"] for c in item["citation_checks"]}
            for p in item["proposals"]:
                names |= {p["author"], p["decided_by"]}
        names.discard(None)
        return names

    # --- write -------------------------------------------------------------------------
    def write(
        self, payload: list[dict[str, Any]], target: Target, problem: Problem
    ) -> dict[str, int]:
        """Insert the items whose (question, created_at) is not stored yet, with their rows.

        A stored item with that key is left as it is (re-import changes nothing); a new
        item that is not closed where the question already has one is a problem."""
        stored = set(
            ReviewItem.objects.filter(benchmark=target.benchmark).values_list(
                "question__question_id", "created_at"
            )
        )
        busy = set(
            ReviewItem.objects.filter(benchmark=target.benchmark)
            .exclude(status__in=ReviewItem.CLOSED)
            .values_list("question__question_id", flat=True)
        )
        new: list[dict[str, Any]] = []
        for item in payload:
            qid = item["question_id"]
            if (qid, item["created_at"]) in stored:
                continue
            if item["status"] not in ReviewItem.CLOSED and qid in busy:
                problem(
                    FILE,
                    item["line"],
                    "status",
                    f"question {qid!r} already has a review item that is not closed in the"
                    " database; close it or import into an empty database",
                )
                continue
            missing = self._missing_entries(item, target)
            if missing:
                problem(
                    FILE,
                    item["line"],
                    missing[0],
                    f"the bundle has no key entry of {qid!r} in edition {missing[1]!r}",
                )
                continue
            new.append(item)
        return self._write_items(new, target)

    @staticmethod
    def _missing_entries(item: dict[str, Any], target: Target) -> tuple[str, str] | None:
        """The first (field, edition) naming an edition without an entry of the question."""
        refs = [
            (f"citation_checks[{i}].key_entry", c["key_entry"])
            for i, c in enumerate(item["citation_checks"])
        ]
        for i, p in enumerate(item["proposals"]):
            refs += [
                (f"proposals[{i}].base_entry", p["base_entry"]),
                (f"proposals[{i}].key_entry", p["key_entry"]),
            ]
        for field, edition in refs:
            if edition and target.entry(edition, item["question_id"]) is None:
                return field, edition
        return None

    def _write_items(self, items: list[dict[str, Any]], target: Target) -> dict[str, int]:
        """Insert `items` and their evidence, checks and proposals: one batched insert per
        table, then one batched update that puts back the recorded times (auto_now and
        auto_now_add overwrite them on insert)."""
        users = target.users
        objs = [
            ReviewItem(
                benchmark=target.benchmark,
                question_id=target.question_pk[item["question_id"]],
                claimed_by=users.get(item["claimed_by"]),
                **{k: item[k] for k in ITEM_FIELDS},
            )
            for item in items
        ]
        ReviewItem.objects.bulk_create(objs, batch_size=BATCH)
        _restore_times(ReviewItem, objs, [(i["created_at"], i["updated_at"]) for i in items])
        children: dict[type, list[tuple[Any, datetime]]] = {
            Evidence: [],
            CitationCheck: [],
            Proposal: [],
        }
        for obj, item in zip(objs, items, strict=True):

            def entry(edition: str | None, qid: str = item["question_id"]) -> int | None:
                return target.entry(edition, qid) if edition else None

            for e in item["evidence"]:
                children[Evidence].append(
                    (
                        Evidence(item=obj, **{k: e[k] for k in ("kind", "detail", "fingerprint")}),
                        e["created_at"],
                    )
                )
            for c in item["citation_checks"]:
                check = CitationCheck(
                    item=obj,
                    reviewer=users[c["reviewer"]],
                    key_entry_id=entry(c["key_entry"]),
                    **{f: c[f] for f in (*CHECK_CHOICES, *CHECK_TEXT)},
                )
                children[CitationCheck].append((check, c["created_at"]))
            for p in item["proposals"]:
                proposal = Proposal(
                    item=obj,
                    author=users[p["author"]],
                    decided_by=users.get(p["decided_by"]),
                    base_entry_id=entry(p["base_entry"]),
                    key_entry_id=entry(p["key_entry"]),
                    **{f: p[f] for f in (*PROPOSAL_TEXT, *PROPOSAL_FIELDS)},
                )
                children[Proposal].append((proposal, p["created_at"]))
        for model, rows in children.items():
            made = [o for o, _ in rows]
            model.objects.bulk_create(made, batch_size=BATCH)
            _restore_times(model, made, [(t,) for _, t in rows])
        return {
            "review_items": len(objs),
            "evidence": len(children[Evidence]),
            "citation_checks": len(children[CitationCheck]),
            "proposals": len(children[Proposal]),
        }


def _restore_times(model: type, objs: list[Any], times: list[tuple[datetime, ...]]) -> None:
    """Set created_at (and updated_at, when two times are given) to the recorded values."""
    if not objs:
        return
    names = ["created_at", "updated_at"][: len(times[0])]
    for obj, values in zip(objs, times, strict=True):
        for name, value in zip(names, values, strict=True):
            setattr(obj, name, value)
    model.objects.bulk_update(objs, names, batch_size=BATCH)


class _Checker:
    """Typed getters for one line of review_items.jsonl, reporting FILE:LINE: FIELD."""

    def __init__(self, problem: Problem, line: int, known: Known) -> None:
        self.problem, self.line, self.known, self.ok = problem, line, known, True

    def error(self, field: str, message: str) -> None:
        self.ok = False
        self.problem(FILE, self.line, field, message)

    def text(
        self, data: dict, name: str, where: str, max_length: int | None = None, null: bool = False
    ) -> str | None:
        value = data.get(name, None if null else "")
        if value is None and null:
            return None
        if not isinstance(value, str):
            self.error(where + name, "must be a string" + (" or null" if null else ""))
            return None
        if "\x00" in value:
            self.error(where + name, "contains a NUL character (U+0000)")
        elif max_length is not None and len(value) > max_length:
            self.error(where + name, f"longer than {max_length} characters")
        return value

    def choice(self, data: dict, name: str, where: str, choices: list[str]) -> str | None:
        value = data.get(name)
        if value not in choices:
            self.error(
                where + name,
                f"{value!r} is not one of {', '.join(c or '(empty)' for c in choices)}",
            )
            return None
        return value

    def time(self, data: dict, name: str, where: str, required: bool = False) -> datetime | None:
        value = data.get(name)
        if value is None:
            if required:
                self.error(where + name, "required (an ISO 8601 date-time with a UTC offset)")
            return None
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            self.error(
                where + name, f"{str(value)[:40]!r} is not an ISO 8601 date-time with a UTC offset"
            )
        return parsed

    def user(self, data: dict, name: str, where: str, required: bool = False) -> str | None:
        value = self.text(data, name, where, USERNAME_MAX, null=True)
        if required and not value:
            self.error(where + name, "required: a user name")
        return value or None

    def entry(self, data: dict, name: str, where: str) -> str | None:
        value = self.text(data, name, where, null=True)
        if value and value not in self.known.editions:
            self.error(
                where + name,
                f"unknown key edition {value!r} (this bundle has: {', '.join(self.known.editions)})",
            )
        return value or None

    def integer(self, data: dict, name: str, minimum: int | None = None) -> int | None:
        value = data.get(name)
        if type(value) is not int or (minimum is not None and value < minimum):
            self.error(
                name, f"must be an integer{'' if minimum is None else f' of at least {minimum}'}"
            )
            return None
        return value

    def objects(self, data: dict, name: str) -> list[dict]:
        value = data.get(name, [])
        if not isinstance(value, list) or any(not isinstance(v, dict) for v in value):
            self.error(name, "must be a list of objects")
            return []
        return value

    def item(self, data: dict) -> dict[str, Any] | None:
        qid = self.text(data, "question_id", "", 100)
        if qid is not None and qid not in self.known.question_ids:
            self.error("question_id", f"unknown question {qid!r}")
        sources = data.get("sources", [])
        if not isinstance(sources, list) or any(s not in Source.values for s in sources):
            self.error("sources", f"must be a list of {', '.join(Source.values)}")
        item = {
            "question_id": qid,
            "source": self.choice(data, "source", "", Source.values),
            "sources": sources,
            "priority": self.integer(data, "priority"),
            "reasons": self.text(data, "reasons", ""),
            "status": self.choice(data, "status", "", ReviewItem.Status.values),
            "claimed_by": self.user(data, "claimed_by", ""),
            "version": self.integer(data, "version", 1),
            **{t: self.time(data, t, "", t in ("created_at", "updated_at")) for t in TIMES},
        }
        if item["status"] == "claimed" and not (item["claimed_by"] and item["claim_expires_at"]):
            self.error("claimed_by", "a claimed item names who holds it and claim_expires_at")
        if item["status"] == "open" and item["claimed_by"]:
            self.error("claimed_by", "an open item has no holder")
        item["evidence"] = [
            self._evidence(e, f"evidence[{i}].")
            for i, e in enumerate(self.objects(data, "evidence"))
        ]
        item["citation_checks"] = [
            self._check(c, f"citation_checks[{i}].")
            for i, c in enumerate(self.objects(data, "citation_checks"))
        ]
        item["proposals"] = [
            self._proposal(p, f"proposals[{i}].")
            for i, p in enumerate(self.objects(data, "proposals"))
        ]
        if sum(p["status"] == "pending" for p in item["proposals"]) > 1:
            self.error("proposals", "an item has at most one pending proposal")
        return item if self.ok else None

    def _evidence(self, e: dict, where: str) -> dict[str, Any]:
        detail = e.get("detail", {})
        if not isinstance(detail, dict) or "\\u0000" in json.dumps(detail):
            self.error(where + "detail", "must be an object without NUL characters")
        return {
            "kind": self.choice(e, "kind", where, Source.values),
            "detail": detail,
            "fingerprint": self.text(e, "fingerprint", where, 40),
            "created_at": self.time(e, "created_at", where, True),
        }

    def _check(self, c: dict, where: str) -> dict[str, Any]:
        row = {f: self.choice(c, f, where, choices) for f, choices in CHECK_CHOICES.items()}
        row.update({f: self.text(c, f, where, TEXT_MAX.get(f)) for f in CHECK_TEXT})
        row["reviewer"] = self.user(c, "reviewer", where, required=True)
        row["key_entry"] = self.entry(c, "key_entry", where)
        row["created_at"] = self.time(c, "created_at", where, True)
        return row

    def _proposal(self, p: dict, where: str) -> dict[str, Any]:
        row = {f: self.text(p, f, where, TEXT_MAX.get(f)) for f in PROPOSAL_TEXT}
        row.update(
            author=self.user(p, "author", where, required=True),
            action=self.choice(p, "action", where, Proposal.Action.values),
            reason=self.choice(p, "reason", where, ["", *KeyEntry.Reason.values]),
            status=self.choice(p, "status", where, Proposal.Status.values),
            decided_by=self.user(p, "decided_by", where),
            decided_at=self.time(p, "decided_at", where),
            base_entry=self.entry(p, "base_entry", where),
            key_entry=self.entry(p, "key_entry", where),
            created_at=self.time(p, "created_at", where, True),
        )
        if row["status"] in ("approved", "rejected") and not row["decided_by"]:
            self.error(
                where + "decided_by", f"a {row['status']} proposal names the editor who decided"
            )
        if row["status"] == "pending" and row["decided_by"]:
            self.error(where + "decided_by", "a pending proposal has no decision yet")
        if row["action"] in ("correct", "remove") and not row["reason"]:
            self.error(where + "reason", "a correction or removal gives a reason")
        if row["decided_by"] and row["decided_by"] == row["author"]:
            self.error(where + "decided_by", "the author cannot decide their own proposal (rule 6)")
        return row


PART = ReviewHistoryPart()
