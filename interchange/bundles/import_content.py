"""Import steps for the benchmark's content: the benchmark itself, categories, source
documents, sections and questions with their ORIGINAL key."""

from __future__ import annotations

from interchange.bundles.import_base import BATCH, REVIEW_HINT, ImportBase
from interchange.bundles.rows import ORIGINAL
from questions.models import (
    Benchmark,
    Category,
    KeyEdition,
    Question,
    Section,
    SourceDocument,
)


class ContentSteps(ImportBase):
    """The steps that write the benchmark, its categories, documents, sections, questions."""

    def _benchmark(self) -> Benchmark:
        d = self.d
        bench = Benchmark.objects.select_for_update().filter(name=d.name).first()
        if bench is None:
            self.created["benchmarks"] = 1
            return Benchmark.objects.create(
                name=d.name,
                version=d.version,
                description=d.description,
                license=d.license,
                grade_scale=d.grade_scale,
                manifest=d.manifest,
            )
        self._compare(
            "manifest.json",
            1,
            ("version", "description", "license", "grade_scale"),
            (bench.version, bench.description, bench.license, bench.grade_scale),
            (d.version, d.description, d.license, d.grade_scale),
        )
        return bench

    def _categories(self) -> None:
        stored = {
            cid: (pk, name)
            for pk, cid, name in Category.objects.filter(benchmark=self.bench).values_list(
                "pk", "category_id", "name"
            )
        }
        new = self._sync(
            "categories.csv",
            ("name",),
            {k: v[1:] for k, v in stored.items()},
            ((cid, (name,), line) for cid, (name, line) in self.d.categories.items()),
        )
        made = self._bulk(
            Category,
            [
                Category(benchmark=self.bench, category_id=cid, name=self.d.categories[cid][0])
                for cid in new
            ],
            "categories",
        )
        self.category_pk = {cid: v[0] for cid, v in stored.items()}
        self.category_pk.update({c.category_id: c.pk for c in made})

    def _documents(self) -> None:
        names = (
            "title",
            "short_title",
            "kind",
            "edition",
            "published",
            "status",
            "url",
            "superseded_by",
        )
        rows = SourceDocument.objects.filter(benchmark=self.bench).values_list(
            "pk", "doc_id", *names[:-1], "superseded_by__doc_id"
        )
        stored = {r[1]: r for r in rows}
        docs = self.d.documents
        new = self._sync(
            "documents.csv",
            names,
            {k: (*v[2:-1], v[-1] or "") for k, v in stored.items()},
            (
                (doc_id, tuple(v[n] or "" if n != "published" else v[n] for n in names), v["line"])
                for doc_id, v in docs.items()
            ),
        )
        made = self._bulk(
            SourceDocument,
            [
                SourceDocument(
                    benchmark=self.bench,
                    doc_id=doc_id,
                    **{
                        n: docs[doc_id][n] or ("" if n != "published" else None) for n in names[:-1]
                    },
                )
                for doc_id in new
            ],
            "documents",
        )
        self.document_pk = {doc_id: r[0] for doc_id, r in stored.items()}
        self.document_pk.update({doc.doc_id: doc.pk for doc in made})
        linked = []
        for doc in made:
            target = docs[doc.doc_id]["superseded_by"]
            if target:
                doc.superseded_by_id = self.document_pk[target]
                linked.append(doc)
        SourceDocument.objects.bulk_update(linked, ["superseded_by"], batch_size=BATCH)

    def _sections(self) -> None:
        stored = {
            (doc_id, loc): (heading, text)
            for doc_id, loc, heading, text in Section.objects.filter(
                document__benchmark=self.bench
            ).values_list("document__doc_id", "locator", "heading", "text")
        }
        secs = self.d.sections
        # Passages are an index of the source text that `import_sources` may have rebuilt
        # since; a difference keeps the stored passage and is only a warning.
        new = [k for k in secs if k not in stored]
        changed = [
            k for k in secs if k in stored and stored[k] != (secs[k]["heading"], secs[k]["text"])
        ]
        if changed:
            self.warnings.append(
                f"sections.jsonl: warning: {len(changed)} passages differ from the stored "
                f"index (e.g. {changed[0][0]} {changed[0][1]} on line "
                f"{secs[changed[0]]['line']}); the stored passages are kept"
            )
        self._bulk(
            Section,
            [
                Section(
                    document_id=self.document_pk[k[0]],
                    locator=k[1],
                    heading=secs[k]["heading"],
                    text=secs[k]["text"],
                    position=secs[k]["position"],
                )
                for k in new
            ],
            "sections",
        )

    def _questions(self) -> None:
        d = self.d
        self.original = KeyEdition.objects.filter(benchmark=self.bench, name=ORIGINAL).first()
        stored = {
            qid: (pk, cid or "", text)
            for pk, qid, cid, text in Question.objects.filter(benchmark=self.bench).values_list(
                "pk", "question_id", "category__category_id", "text"
            )
        }
        new = self._sync(
            "questions.jsonl",
            ("category_id", "text"),
            {k: v[1:] for k, v in stored.items()},
            ((qid, (q["category_id"], q["text"]), q["line"]) for qid, q in d.questions.items()),
        )
        if self.original is not None:
            for qid in new:
                self.p.add(
                    "questions.jsonl",
                    d.questions[qid]["line"],
                    "question_id",
                    f"{qid!r} is not in the stored original key; {REVIEW_HINT}",
                )
            missing = sorted(set(stored) - set(d.questions))
            if missing:
                self.p.add(
                    "questions.jsonl",
                    0,
                    "question_id",
                    f"{len(missing)} questions of the stored original key are missing "
                    f"from this bundle (e.g. {', '.join(missing[:5])}); {REVIEW_HINT}",
                )
            new = []
        made = self._bulk(
            Question,
            [
                Question(
                    benchmark=self.bench,
                    question_id=qid,
                    text=d.questions[qid]["text"],
                    category_id=self.category_pk.get(d.questions[qid]["category_id"]),
                )
                for qid in new
            ],
            "questions",
        )
        self.question_pk = {qid: v[0] for qid, v in stored.items()}
        self.question_pk.update({q.question_id: q.pk for q in made})
