"""Import steps for models, judges, responses, grades and audit verdicts, then rule 4's
exclusions on the imported verdicts (scoring.audit_rule)."""

from __future__ import annotations

from typing import Any

from interchange.bundles.import_base import ImportBase
from questions.models import (
    KeyEntry,
    ModelUnderTest,
    Response,
)
from scoring.audit_rule import exclude_by_audit
from scoring.models import AuditVerdict, Grade, Judge
from scoring.runs.services.panel import judge_panel_set, panel_state


class JudgingSteps(ImportBase):
    """The steps that write models, judges, responses, grades, audits and exclusions."""

    def _models(self) -> None:
        names = ("name", "vendor")
        stored = {
            r[1]: r
            for r in ModelUnderTest.objects.filter(benchmark=self.bench).values_list(
                "pk", "model_id", *names
            )
        }
        ms = self.d.models
        new = self._sync(
            "models.csv",
            names,
            {k: v[2:] for k, v in stored.items()},
            ((k, (v["name"], v["vendor"]), v["line"]) for k, v in ms.items()),
        )
        made = self._bulk(
            ModelUnderTest,
            [
                ModelUnderTest(
                    benchmark=self.bench, model_id=k, name=ms[k]["name"], vendor=ms[k]["vendor"]
                )
                for k in new
            ],
            "models",
        )
        self.model_pk = {k: v[0] for k, v in stored.items()}
        self.model_pk.update({m.model_id: m.pk for m in made})

    def _judges(self) -> None:
        names = ("name", "vendor", "role")
        config = ("backend", "model", "prompt_version")
        stored = {
            r[1]: r
            for r in Judge.objects.filter(benchmark=self.bench).values_list(
                "pk", "judge_id", *names, *config
            )
        }
        js = self.d.judges
        new = self._sync(
            "judges.csv",
            names,
            {k: v[2:5] for k, v in stored.items()},
            ((k, tuple(v[n] for n in names), v["line"]) for k, v in js.items()),
        )
        for jid, row in stored.items():
            if jid in js and tuple(js[jid][n] for n in config) != row[5:]:
                self.warnings.append(
                    f"judges.csv:{js[jid]['line']}: warning: judge {jid!r} is configured "
                    "differently in the database (backend/model/prompt_version); kept as stored"
                )
        self.new_judges = set(new)
        # A judge that calls an API arrives inactive (issue 26): a bundle is untrusted, and
        # only an admin who has seen its address and key variable activates it.
        calling = sorted(k for k in new if js[k]["backend"] in Judge.CALLING_BACKENDS)
        made = self._bulk(
            Judge,
            [
                Judge(
                    benchmark=self.bench,
                    judge_id=k,
                    active=k not in calling,
                    **{n: js[k][n] for n in (*names, *config)},
                )
                for k in new
            ],
            "judges",
        )
        if calling:
            self.warnings.append(
                f"judges.csv: warning: judge {', '.join(map(repr, calling))} calls an API and "
                "was added inactive; an admin checks its address and key variable and "
                "activates it (manage.py activate_judge ID, or the admin's judge list)"
            )
        self.judge_pk = {k: v[0] for k, v in stored.items()}
        self.judge_pk.update({j.judge_id: j.pk for j in made})
        self._panel()

    def _panel(self) -> None:
        """Seat the bundle's judges (role judge) as the judge panel of a benchmark that has
        none; an existing panel is kept (adding judges never changes published figures) and
        a warning names the bundle's judges that are not on it."""
        bundle_judges = sorted(k for k, v in self.d.judges.items() if v["role"] == Judge.Role.JUDGE)
        if not bundle_judges:
            return
        current = panel_state(self.bench)
        if not current:
            judge_panel_set(
                benchmark=self.bench, members=[(j, None) for j in bundle_judges], actor=self.user
            )
            return
        seated = {m["judge"] for m in current}
        outside = [j for j in bundle_judges if j not in seated]
        if outside:
            self.warnings.append(
                f"judges.csv: warning: judge {', '.join(map(repr, outside))} not on the judge "
                f"panel ({', '.join(sorted(seated))}), kept as it was; an admin changes it "
                "with manage.py panel --set"
            )

    def _responses(self) -> None:
        stored = {
            (q, m): (pk, text)
            for pk, q, m, text in Response.objects.filter(
                question__benchmark=self.bench
            ).values_list("pk", "question_id", "model_id", "text")
        }
        qpk, mpk = self.question_pk, self.model_pk
        incoming = []
        for (qid, mid), (text, line) in self.d.responses.items():
            if qid in qpk and mid in mpk:
                incoming.append(((qpk[qid], mpk[mid]), (text,), line))
        texts = {key: values[0] for key, values, _ in incoming}
        new = self._sync(
            "responses.jsonl", ("text",), {k: v[1:] for k, v in stored.items()}, incoming
        )
        pks = self._bulk_rows(
            Response,
            [{"question_id": q, "model_id": m, "text": texts[(q, m)]} for q, m in new],
            "responses",
        )
        self.response_pk = {k: v[0] for k, v in stored.items()}
        self.response_pk.update(zip(new, pks, strict=True))

    def _key_entry(self, file: str, row: dict[str, Any]) -> int | None:
        entries = self.effective.get(row["edition"])
        qpk = self.question_pk.get(row["question_id"])
        if entries is None or qpk is None:
            return None
        entry = entries.get(qpk)
        if entry is None:
            self.p.add(
                file,
                row["line"],
                "edition",
                f"question {row['question_id']!r} has no key entry in edition {row['edition']!r}",
            )
        return entry

    def _grades(self) -> None:
        file = "grades.jsonl"
        names = ("grade", "rationale", "flag", "flag_reason", "raw_output", "stop_reason")
        stored = {
            r[:4]: r[4:]
            for r in Grade.objects.filter(judge__benchmark=self.bench)
            .values_list("response_id", "judge_id", "key_entry_id", "prompt_version", *names)
            .iterator(chunk_size=5000)
        }
        seen: dict[tuple[Any, ...], int] = {}
        new = []
        for row in self.d.grades:
            rpk = self.response_pk.get(
                (self.question_pk.get(row["question_id"]), self.model_pk.get(row["model_id"]))
            )
            entry = self._key_entry(file, row)
            jpk = self.judge_pk.get(row["judge_id"])
            if rpk is None or entry is None or jpk is None:
                continue
            key = (rpk, jpk, entry, row["prompt_version"])
            if key in seen:
                self.p.add(
                    file,
                    row["line"],
                    "edition",
                    f"same response, judge, key entry and "
                    f"prompt version as line {seen[key]} (edition {row['edition']!r} "
                    "inherits that question's entry)",
                )
                continue
            seen[key] = row["line"]
            values = tuple(row[n] if n in ("grade", "flag") else row[n] or "" for n in names)
            if key in stored:
                self._compare(file, row["line"], names, stored[key], values)
            else:
                new.append(
                    {
                        "response_id": rpk,
                        "judge_id": jpk,
                        "key_entry_id": entry,
                        "prompt_version": row["prompt_version"],
                        **dict(zip(names, values, strict=True)),
                    }
                )
        self._bulk_rows(Grade, new, "grades", batch=5000)

    def _audits(self) -> None:
        file = "audits.jsonl"
        names = ("verdict", "rationale", "raw_output")
        stored = {
            r[:3]: r[3:]
            for r in AuditVerdict.objects.filter(auditor__benchmark=self.bench).values_list(
                "key_entry_id", "auditor_id", "prompt_version", *names
            )
        }
        seen: dict[tuple[Any, ...], int] = {}
        new = []
        for row in self.d.audits:
            entry = self._key_entry(file, row)
            jpk = self.judge_pk.get(row["judge_id"])
            if entry is None or jpk is None:
                continue
            key = (entry, jpk, row["prompt_version"])
            if key in seen:
                self.p.add(
                    file,
                    row["line"],
                    "edition",
                    f"same key entry, auditor and prompt version as line {seen[key]}",
                )
                continue
            seen[key] = row["line"]
            values = (row["verdict"], row["rationale"] or "", row["raw_output"] or "")
            if key in stored:
                self._compare(file, row["line"], names, stored[key], values)
            else:
                new.append(
                    {
                        "key_entry_id": entry,
                        "auditor_id": jpk,
                        "prompt_version": row["prompt_version"],
                        **dict(zip(names, values, strict=True)),
                    }
                )
        self._bulk_rows(AuditVerdict, new, "audits")

    def _exclusions(self) -> None:
        """Rule 4 on the imported verdicts: entries both auditors find adverse are excluded
        and logged (scoring.audit_rule, as triage does), so the benchmark is scored as the
        rule says from the start and an export re-imports to the same exclusions."""
        if self.p:  # the import fails anyway; its verdicts may be incomplete
            return
        entries = KeyEntry.objects.filter(edition__benchmark=self.bench).values_list(
            "pk", flat=True
        )
        new = exclude_by_audit(
            entries,
            user=self.user,
            source="bundle import (both auditors adverse in audits.jsonl)",
        )
        self.created["exclusions"] = len(new)
