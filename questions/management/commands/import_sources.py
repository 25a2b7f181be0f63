"""Index the plain text of source documents into located passages (Section rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction

from core import content_cache
from questions import passages, sources
from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    bad_input,
    resolve_benchmark,
    usage_error,
    write_json,
)
from questions.models import KeyEntry, Section, SourceDocument


def _cited_quotes(document: SourceDocument) -> list[tuple[str, str, str]]:
    """Return (locator, quote, "QID in EDITION") of every key entry quoting `document`."""
    return [
        (loc, quote, f"{qid} in {edition}")
        for loc, quote, qid, edition in KeyEntry.objects.filter(citation_document=document)
        .exclude(citation_quote="")
        .exclude(citation_locator="")
        .order_by("question__question_id", "edition__created_at", "id")
        .values_list("citation_locator", "citation_quote", "question__question_id", "edition__name")
    ]


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise bad_input(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise bad_input(
            f"{path}:{line}: encoding: not valid UTF-8 at byte offset {exc.start}"
        ) from exc


class Command(JsonCommand):
    help = (
        "Index source document text files into located passages (paragraphs, tables, "
        "diagrams). Creates the SourceDocument when it is new (metadata guessed from the "
        "file) and replaces its passages; a stored document's metadata is kept. A stored "
        "passage that holds a key entry's cited quote is kept when the new text's passage "
        "at that locator does not hold it (each one kept is reported)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
        parser.add_argument(
            "--doc-id",
            default=None,
            metavar="ID",
            help="the document's doc_id (only with one FILE)",
        )
        add_benchmark_argument(parser)
        add_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        paths = [Path(f) for f in options["files"]]
        if options["doc_id"] and len(paths) > 1:
            raise usage_error("--doc-id names one document: give exactly one FILE")
        benchmark = resolve_benchmark(options["benchmark"])
        parsed = []
        seen: dict[str, Path] = {}
        for path in paths:
            text = _read_text(path)
            try:
                meta = sources.guess_document_meta(path.name, text)
            except ValueError as exc:
                if not options["doc_id"]:
                    raise bad_input(f"{path}: {exc}; name it with --doc-id") from exc
                meta = {"title": options["doc_id"], "edition": None, "kind": ""}
            doc_id = options["doc_id"] or meta["doc_id"]
            if doc_id in seen:
                raise bad_input(f"{path} and {seen[doc_id]} are both document {doc_id!r}")
            seen[doc_id] = path
            sections = sources.parse_sections(text)
            if not sections:
                raise bad_input(f"{path}: no located passages found (is it a document text?)")
            parsed.append((path, doc_id, meta, sections))
        report = []
        with transaction.atomic():
            for path, doc_id, meta, sections in parsed:
                document, created = SourceDocument.objects.get_or_create(
                    benchmark=benchmark,
                    doc_id=doc_id,
                    defaults={
                        "title": meta.get("title") or doc_id,
                        "short_title": doc_id,
                        "edition": str(meta["edition"]) if meta.get("edition") else "",
                        "kind": meta.get("kind") or "",
                    },
                )
                if not created and not document.edition and meta.get("edition"):
                    document.edition = str(meta["edition"])
                    document.save(update_fields=["edition"])
                stored = list(
                    Section.objects.filter(document=document)
                    .order_by("position", "id")
                    .values_list("locator", "heading", "text")
                )
                sections, kept = passages.keep_quoted_passages(
                    sections, stored, _cited_quotes(document) if stored else []
                )
                removed, _ = Section.objects.filter(document=document).delete()
                # the delete and bulk_create send no signal: drop the cached passages
                content_cache.bump(benchmark.pk, "sources")
                Section.objects.bulk_create(
                    [
                        Section(
                            document=document,
                            locator=s.locator,
                            heading=s.heading,
                            text=s.text,
                            position=s.position,
                        )
                        for s in sections
                    ],
                    batch_size=1000,
                )
                report.append(
                    {
                        "file": str(path),
                        "doc_id": doc_id,
                        "created": created,
                        "sections": len(sections),
                        "replaced": removed,
                        "kept": kept,
                    }
                )
        if options["format"] == "json":
            write_json(self, {"benchmark": benchmark.name, "documents": report})
            return
        for row in report:
            state = "new document" if row["created"] else f"replaced {row['replaced']} passages"
            self.stdout.write(
                f"{row['doc_id']}: {row['sections']} passages ({state}) from {row['file']}"
            )
            for k in row["kept"]:
                self.stdout.write(
                    f"  kept the stored passage {k['locator']}: it holds the quote cited by "
                    f"{', '.join(k['cited_by'])}; {k['why']}"
                )
