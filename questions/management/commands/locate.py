"""Print the passage of a source document at a locator (clause, table, diagram)."""

from __future__ import annotations

from typing import Any

from questions import sources
from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    bad_input,
    resolve_benchmark,
    write_json,
)
from questions.models import Section, SourceDocument
from questions.selectors import section_for_locator


class Command(JsonCommand):
    help = "Print the passage at LOCATOR of DOC_ID; exit 1 with the nearest locators if absent."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("doc_id", metavar="DOC_ID")
        parser.add_argument("locator", metavar="LOCATOR")
        add_benchmark_argument(parser)
        add_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        benchmark = resolve_benchmark(options["benchmark"])
        as_json = options["format"] == "json"
        doc_id, locator = options["doc_id"], options["locator"]
        document = SourceDocument.objects.filter(benchmark=benchmark, doc_id=doc_id).first()
        if document is None:
            known = list(
                SourceDocument.objects.filter(benchmark=benchmark).values_list("doc_id", flat=True)
            )
            if as_json:
                write_json(
                    self,
                    {
                        "ok": False,
                        "found": False,
                        "doc_id": doc_id,
                        "locator": locator,
                        "error": "unknown document",
                        "exit_code": 1,
                        "documents": known,
                    },
                )
            raise bad_input(
                f"not found: no document {doc_id!r} in {benchmark.name} "
                f"(documents: {', '.join(known) or 'none'})"
            )
        try:
            section = section_for_locator(document, locator) if locator.strip() else None
        except ValueError:
            section = None
        if section is None:
            available = list(
                Section.objects.filter(document=document)
                .order_by("position", "id")
                .values_list("locator", flat=True)
            )
            nearest = sources.nearest_locators(locator, available, n=5)
            if as_json:
                write_json(
                    self,
                    {
                        "ok": False,
                        "found": False,
                        "doc_id": doc_id,
                        "locator": locator,
                        "error": "not found",
                        "exit_code": 1,
                        "nearest": nearest,
                    },
                )
            raise bad_input(
                f"not found: {doc_id} {locator!r}; nearest locators: "
                f"{', '.join(nearest) or '(document has no passages)'}"
            )
        if as_json:
            write_json(
                self,
                {
                    "found": True,
                    "doc_id": doc_id,
                    "locator": section.locator,
                    "document": document.title,
                    "edition": document.edition,
                    "heading": section.heading,
                    "text": section.text,
                    "position": section.position,
                },
            )
            return
        self.stdout.write(
            f"{document.title} ({document.edition or 'edition not stated'}) {section.locator}"
        )
        self.stdout.write(section.heading)
        self.stdout.write("")
        self.stdout.write(section.text)
