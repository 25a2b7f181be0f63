"""`queue` and `queue add` (../shared/spec/cli.md): list the review queue; raise an item by hand.

    queue [--benchmark NAME] [--edition NAME] [--state open|all] [--format table|json]
    queue add QUESTION_ID --note TEXT [--benchmark NAME] [--edition NAME] [--user NAME]

The list is in queue order (priority, then age: the order reviewers get items), each with
its priority points (review.priority), its reasons in words and its evidence kinds, each
with a one-line summary. `--edition` names the key edition (default: the latest
published); items are per question, not per edition, so it does not filter them.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    bad_input,
    domain_error,
    resolve_benchmark,
    usage_error,
    write_json,
)
from questions.errors import DomainError
from questions.models import Question
from questions.selectors import get_edition
from review.models import ReviewItem
from review.priority import evidence_words
from review.services import review_item_report


def queue_document(benchmark, edition, *, state: str) -> dict:
    """Return the `queue --format json` document (cli.md): items in queue order (2 queries)."""
    items = ReviewItem.objects.filter(benchmark=benchmark).select_related("question")
    if state == "open":
        items = items.exclude(status__in=ReviewItem.CLOSED)
    items = list(items.order_by("-priority", "id").prefetch_related("evidence"))
    return {
        "benchmark": benchmark.name,
        "edition": edition.name if edition else None,
        "items": [
            {
                "position": n,
                "item": item.pk,
                "question_id": item.question.question_id,
                "state": item.status,
                "priority": item.priority,
                "reasons": item.reasons,
                "evidence": [
                    {"kind": e.kind, "summary": evidence_words(e.kind, e.detail or {})}
                    for e in item.evidence.all()
                ],
            }
            for n, item in enumerate(items, 1)
        ],
    }


class Command(JsonCommand):
    help = (
        "List the review queue in order, or `queue add QUESTION_ID --note TEXT` to raise an item."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["add"], help="add: raise an item by hand")
        parser.add_argument("question_id", nargs="?", metavar="QUESTION_ID")
        add_benchmark_argument(parser)
        parser.add_argument("--edition", metavar="NAME", default=None)
        parser.add_argument("--state", choices=["open", "all"], default="open")
        parser.add_argument("--note", metavar="TEXT", default=None, help="with add: what is wrong")
        parser.add_argument("--user", metavar="NAME", default=None, help="with add: who reports")
        add_format_argument(parser, ("table", "json"))

    def handle(self, *args, **options):
        if options["action"] is None and (options["question_id"] or options["note"]):
            raise usage_error("QUESTION_ID and --note go with `queue add`")
        benchmark = resolve_benchmark(options["benchmark"])
        try:
            edition = get_edition(benchmark, options["edition"])
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["action"] == "add":
            return self._add(benchmark, edition, options)
        doc = queue_document(benchmark, edition, state=options["state"])
        if options["format"] == "json":
            write_json(self, doc)
            return
        self.stdout.write(f"Review queue of {doc['benchmark']} ({len(doc['items'])} items)")
        for row in doc["items"]:
            self.stdout.write(
                f"{row['position']:>4}  {row['question_id']:<12} {row['state']:<10} "
                f"{row['priority']:>5}  {row['reasons']}"
            )

    def _add(self, benchmark, edition, options):
        if not options["question_id"] or options["note"] is None:
            raise usage_error("queue add needs QUESTION_ID and --note TEXT")
        question = Question.objects.filter(
            benchmark=benchmark, question_id=options["question_id"]
        ).first()
        if question is None:
            raise bad_input(f"question {options['question_id']!r} not found in {benchmark.name}")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
            if user is None:
                raise bad_input(f"--user: no active user {options['user']!r}")
        try:
            item, created = review_item_report(
                question=question, note=options["note"], user=user, edition_name=edition.name
            )
        except DomainError as exc:
            raise domain_error(exc) from exc
        result = {"item": item.pk, "question_id": question.question_id, "created": created,
                  "priority": item.priority, "reasons": item.reasons}  # fmt: skip
        if options["format"] == "json":
            write_json(self, result)
        else:
            verb = "raised" if created else "note added to open"
            self.stdout.write(f"{verb} item {item.pk} for {question.question_id}: {item.reasons}")
