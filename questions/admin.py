"""Admin for the data layer. Published key editions and their entries are read-only
(methodology rule 7; the database triggers refuse the write anyway)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import model_ngettext
from django.db import models

from core import content_cache
from questions.models import (
    AuditExclusion,
    Benchmark,
    Category,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
    Section,
    SourceDocument,
)


class ViewOnlyAdmin(admin.ModelAdmin):
    """An admin page that shows rows but never adds, changes or deletes them.

    For rows that only the product's own paths may write, each with its audit trail: key
    entries (import and the review workflow, rule 6's approval), responses (import),
    grades, verdicts, exclusions, runs and the judge-call ledger (scoring and triage). A
    hand edit there would change published figures with no approval and no log entry.
    """

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    """Benchmarks; the public switch is changed only by the actions, which log it (issue 22).

    The list offers no bulk delete: removing a benchmark takes its questions, responses
    and published editions with it, so it is not an action beside the public-site ones
    (issue 30 item 16).
    """

    list_display = ["name", "version", "is_public", "credit_reviewers", "created_at"]
    search_fields = ["name", "description"]
    readonly_fields = ["created_at", "is_public", "credit_reviewers"]
    actions = ["make_public", "make_public_crediting", "make_private"]

    def get_actions(self, request: Any) -> dict[str, Any]:
        # No bulk delete: a benchmark with a published edition is deleted by the command.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        """Refuse a benchmark with a published key edition before collecting its rows.

        Django's page lists every dependent row (4,087 queries, 76 s on the demo, issue 26)
        and the triggers refuse the delete anyway; `manage.py delete_benchmark` does it
        in one transaction with an audit entry (questions.benchmark_delete).
        """
        from django.shortcuts import redirect

        benchmark = Benchmark.objects.filter(pk=object_id).only("name").first()
        if (
            benchmark is not None
            and KeyEdition.objects.filter(
                benchmark=benchmark, status=KeyEdition.Status.PUBLISHED
            ).exists()
        ):
            self.message_user(
                request,
                f"{benchmark.name} has a published key edition, which this page cannot "
                "delete. Run, as the database's owner: manage.py delete_benchmark "
                f'--benchmark {benchmark.name} (docs/admin.md, "Deleting a benchmark").',
                level=messages.ERROR,
            )
            return redirect("admin:questions_benchmark_change", benchmark.pk)
        return super().delete_view(request, object_id, extra_context)

    def _set(self, request: Any, queryset: Any, public: bool, credit: bool) -> None:
        from questions.services import benchmark_publicity_set

        for benchmark in queryset:
            try:
                benchmark_publicity_set(
                    benchmark=benchmark, user=request.user, public=public, credit_reviewers=credit
                )
            except PermissionError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)
                return
        n = queryset.count()
        self.message_user(request, f"{n} {model_ngettext(queryset, n)} updated.")

    @admin.action(description="Publish the results site (names of people hidden)")
    def make_public(self, request: Any, queryset: Any) -> None:
        self._set(request, queryset, True, False)

    @admin.action(description="Publish the results site and credit the people who published")
    def make_public_crediting(self, request: Any, queryset: Any) -> None:
        self._set(request, queryset, True, True)

    @admin.action(description="Take the results site down (private)")
    def make_private(self, request: Any, queryset: Any) -> None:
        self._set(request, queryset, False, False)


@admin.register(SourceDocument)
class SourceDocumentAdmin(admin.ModelAdmin):
    list_display = ["doc_id", "short_title", "title", "edition", "status", "published", "benchmark"]
    list_filter = ["benchmark", "status", "kind"]
    search_fields = ["doc_id", "title", "short_title"]
    raw_id_fields = ["superseded_by"]
    # A document's address typed without a scheme is read as https (Django 6's default;
    # Django 5.2 warns on every form it builds without the choice made).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        # Key entries keep the doc_id they cite as written (KeyEntry.citation_doc_id).
        return ["benchmark", "doc_id"] if obj is not None else []

    def delete_model(self, request: Any, obj: Any) -> None:
        super().delete_model(request, obj)
        content_cache.bump(obj.benchmark_id, "sources")  # the review pages' cached passages

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        benchmarks = set(queryset.values_list("benchmark_id", flat=True))
        super().delete_queryset(request, queryset)
        for benchmark_id in benchmarks:
            content_cache.bump(benchmark_id, "sources")


@admin.register(Section)
class SectionAdmin(admin.ModelAdmin):
    list_display = ["document", "locator", "heading", "position"]
    list_filter = ["document__benchmark", "document"]
    search_fields = ["locator", "heading", "text", "document__doc_id"]
    list_select_related = ["document"]
    raw_id_fields = ["document"]

    def delete_model(self, request: Any, obj: Any) -> None:
        super().delete_model(request, obj)
        content_cache.bump(obj.document.benchmark_id, "sources")  # cached passages

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        benchmarks = set(queryset.values_list("document__benchmark_id", flat=True))
        super().delete_queryset(request, queryset)
        for benchmark_id in benchmarks:
            content_cache.bump(benchmark_id, "sources")


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    list_display = ["category_id", "name", "benchmark"]
    list_filter = ["benchmark"]
    search_fields = ["category_id", "name"]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        # The id is what bundles and per-category figures name; its display name may change.
        return ["benchmark", "category_id"] if obj is not None else []


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ["question_id", "benchmark", "category"]
    list_filter = ["benchmark", "category"]
    search_fields = ["question_id", "text"]
    list_select_related = ["benchmark", "category"]
    raw_id_fields = ["category"]

    @staticmethod
    def _keyed(obj: Any) -> bool:
        """Return True when a published key edition answers this question (rule 7)."""
        return obj is not None and obj.key_entries.filter(edition__status="published").exists()

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        # The database refuses these changes too (migration 0004); say so in the form.
        return ["benchmark", "question_id", "category", "text"] if self._keyed(obj) else []

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return not self._keyed(obj) and super().has_delete_permission(request, obj)


class _PublishedReadOnly(admin.ModelAdmin):
    """Refuse change and delete of rows that belong to a published key edition."""

    def _published(self, obj: Any) -> bool:
        """Return True when `obj` belongs to a published key edition (each subclass says how)."""
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        if obj is not None and self._published(obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        if obj is not None and self._published(obj):
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request: Any) -> dict[str, Any]:
        # Bulk delete would hit published rows; deleting goes through the change page.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions


@admin.register(KeyEdition)
class KeyEditionAdmin(_PublishedReadOnly):
    list_display = ["name", "benchmark", "status", "parent", "published_at", "published_by"]
    list_filter = ["benchmark", "status"]
    search_fields = ["name", "note"]
    readonly_fields = ["status", "published_at", "published_by", "created_at"]
    list_select_related = ["benchmark", "parent", "published_by"]

    def _published(self, obj: KeyEdition) -> bool:
        return obj.is_published()


@admin.register(KeyEntry)
class KeyEntryAdmin(ViewOnlyAdmin):
    """Entries come from import and from approved proposals (rule 6), in drafts too: an
    entry written or changed here would be published with no editor's approval."""

    list_display = [
        "question",
        "edition",
        "answer",
        "citation_doc_id",
        "citation_locator",
        "has_citation",
        "removed",
        "reason",
    ]
    list_filter = ["edition__benchmark", "edition", "removed", "reason", "has_citation"]
    search_fields = ["question__question_id", "answer", "citation_doc_id", "citation_locator"]
    list_select_related = ["question", "edition", "edition__benchmark"]
    raw_id_fields = ["question", "citation_document", "edition"]


@admin.register(AuditExclusion)
class AuditExclusionAdmin(ViewOnlyAdmin):
    """Triage writes exclusions (rule 4) with an audit-log entry; the admin only shows them."""

    list_display = ["key_entry", "reason", "excluded_at"]
    list_filter = ["key_entry__edition__benchmark", "key_entry__edition", "reason"]
    search_fields = ["key_entry__question__question_id"]
    list_select_related = ["key_entry__question", "key_entry__edition"]


@admin.register(ModelUnderTest)
class ModelUnderTestAdmin(admin.ModelAdmin):
    list_display = ["model_id", "name", "vendor", "benchmark"]
    list_filter = ["benchmark", "vendor"]
    search_fields = ["model_id", "name", "vendor"]


@admin.register(Response)
class ResponseAdmin(ViewOnlyAdmin):
    """Responses come from bundles; their grades rest on the text as imported."""

    list_display = ["question", "model"]
    list_filter = ["question__benchmark", "model"]
    search_fields = ["question__question_id", "model__model_id", "text"]
    list_select_related = ["question", "model"]
    raw_id_fields = ["question", "model"]
