"""Admin for judges, grades, audit verdicts and scoring runs. Secrets are never stored:
a judge names the environment variable that holds its key (`api_key_env`)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import transaction
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse

from core.actions import Action
from core.services import audit_log
from questions.admin import ViewOnlyAdmin
from questions.errors import DomainError
from scoring import models as m
from scoring.runs.services.backends import endpoint_problems
from scoring.runs.services.judge_access import judge_endpoint, judge_set_active

PRICE_COLUMNS = ("price_currency", *m.PRICE_FIELDS)


def _prices(judge: m.Judge | None) -> dict[str, str | None]:
    """Return a judge's price columns as JSON-able text ({} for no judge)."""
    if judge is None:
        return {}
    return {
        name: (None if getattr(judge, name) is None else str(getattr(judge, name)))
        for name in PRICE_COLUMNS
    }


class JudgeForm(forms.ModelForm):
    """The judge form: base_url and api_key_env must pass the settings' EndpointPolicy
    (scoring.runs.services.backends.endpoint_problems; docs/admin.md)."""

    base_url = forms.URLField(max_length=500, required=False, assume_scheme="https")

    class Meta:
        model = m.Judge
        fields = ["backend", "base_url", "api_key_env"]  # the admin adds its fieldsets

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        problems = endpoint_problems(
            backend=data.get("backend") or "",
            base_url=data.get("base_url") or "",
            api_key_env=data.get("api_key_env") or "",
        )
        for field, reason in problems:
            self.add_error(field, reason)
        return data


@admin.register(m.Judge)
class JudgeAdmin(admin.ModelAdmin):
    """Judges and their prices. Prices are per million tokens, live and batch, in the
    judge's currency, copied by an admin from the vendor's price page; empty = unknown (the
    cost of that judge's calls is then reported as unknown). A change of prices is written
    to the audit log (judge.prices_set) with the prices before and after.

    `active` is not edited in the form: the actions "Activate" (a page showing each judge's
    address and key variable first) and "Deactivate" change it, audit-logged
    (scoring.runs.services.judge_access)."""

    form = JudgeForm
    readonly_fields = ["active"]
    actions = ["activate_judges", "deactivate_judges"]

    fieldsets = [
        (
            None,
            {
                "fields": [
                    "benchmark",
                    "judge_id",
                    "name",
                    "vendor",
                    "role",
                    "backend",
                    "model",
                    "base_url",
                    "api_key_env",
                    "prompt_version",
                    "backend_settings",
                    "active",
                ]
            },
        ),
        (
            "Prices per million tokens",
            {
                "fields": [
                    "price_currency",
                    ("price_input", "price_cached_input", "price_output"),
                    ("batch_price_input", "batch_price_cached_input", "batch_price_output"),
                ],
                "description": "From the vendor's price page; there is no built-in list. "
                "Leave a price empty when you do not know it: costs that need it show "
                "as unknown.",
            },
        ),
    ]
    list_display = [
        "judge_id",
        "name",
        "role",
        "vendor",
        "backend",
        "model",
        "prompt_version",
        "active",
        "benchmark",
    ]
    list_filter = ["benchmark", "role", "backend", "vendor", "active"]
    search_fields = ["judge_id", "name", "model"]

    @admin.action(description="Activate the selected judges (shows their addresses first)")
    def activate_judges(self, request: Any, queryset: Any) -> Any:
        """First show each judge's address, key variable and whether the settings allow
        them; on confirmation, activate those allowed (judge_set_active, audit-logged)."""
        judges = list(queryset.select_related("benchmark").order_by("benchmark", "judge_id"))
        if request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Activate judges",
                "rows": [judge_endpoint(j) for j in judges],
                "selected": [j.pk for j in judges],
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/scoring/judge/activate.html", context)
        done = 0
        for judge in judges:
            try:
                done += judge_set_active(judge=judge, active=True, actor=request.user)
            except DomainError as exc:
                self.message_user(request, str(exc), messages.ERROR)
        self.message_user(request, f"Activated {done} judge{pluralize(done)}.")
        return None

    @admin.action(description="Deactivate the selected judges")
    def deactivate_judges(self, request: Any, queryset: Any) -> None:
        """Deactivate the selected judges (judge_set_active, audit-logged)."""
        done = sum(
            judge_set_active(judge=j, active=False, actor=request.user)
            for j in queryset.select_related("benchmark")
        )
        self.message_user(request, f"Deactivated {done} judge{pluralize(done)}.")

    def save_model(self, request: Any, obj: m.Judge, form: Any, change: bool) -> None:
        """Save the judge; when its prices changed, log them in the same transaction."""
        with transaction.atomic():
            before = _prices(m.Judge.objects.filter(pk=obj.pk).first() if change else None)
            super().save_model(request, obj, form, change)
            after = _prices(m.Judge.objects.get(pk=obj.pk))  # as stored: 3 and 3.00 are one
            if after != before and any(v not in (None, "") for v in {**before, **after}.values()):
                audit_log(
                    actor=request.user,
                    action=Action.JUDGE_PRICES_SET,
                    target_type="judge",
                    target_id=obj.pk,
                    target_label=str(obj),
                    benchmark_name=obj.benchmark.name,
                    before=before or None,
                    after=after,
                )


@admin.register(m.ScoringRun)
class ScoringRunAdmin(ViewOnlyAdmin):
    """Runs are started, cancelled and resumed from the runs pages and commands."""

    list_display = [
        "id",
        "benchmark",
        "edition",
        "kind",
        "status",
        "needed",
        "done",
        "graded",
        "reused",
        "failed",
        "unparsed",
        "created_at",
    ]
    list_filter = ["benchmark", "kind", "status"]
    search_fields = ["id", "edition__name", "error"]
    list_select_related = ["benchmark", "edition"]
    raw_id_fields = ["edition", "created_by"]
    filter_horizontal = ["judges"]


@admin.register(m.Grade)
class GradeAdmin(ViewOnlyAdmin):
    """Grades are judges' outputs: a hand edit would change published figures unlogged."""

    list_display = [
        "response",
        "judge",
        "key_entry",
        "grade",
        "flag",
        "prompt_version",
        "created_at",
    ]
    list_filter = ["judge__benchmark", "judge", "grade", "flag", "prompt_version"]
    search_fields = [
        "response__question__question_id",
        "response__model__model_id",
        "rationale",
        "flag_reason",
    ]
    list_select_related = [
        "response__question",
        "response__model",
        "judge",
        "key_entry__edition",
        "key_entry__question",
    ]
    raw_id_fields = ["response", "key_entry", "run"]


@admin.register(m.AuditVerdict)
class AuditVerdictAdmin(ViewOnlyAdmin):
    """Verdicts are auditors' outputs; triage turns them into exclusions."""

    list_display = ["key_entry", "auditor", "verdict", "prompt_version", "created_at"]
    list_filter = ["auditor__benchmark", "auditor", "verdict"]
    search_fields = ["key_entry__question__question_id", "rationale"]
    list_select_related = ["key_entry__edition", "key_entry__question", "auditor"]
    raw_id_fields = ["key_entry", "run"]


@admin.register(m.JudgeCall)
class JudgeCallAdmin(ViewOnlyAdmin):
    """The ledger of paid judge calls: evidence, never edited."""

    list_display = ["id", "run", "judge", "outcome", "prompt_version", "created_at"]
    list_filter = ["outcome", "judge"]
    search_fields = ["detail"]
    list_select_related = ["run__edition", "judge"]
    raw_id_fields = ["run", "response", "key_entry"]


@admin.register(m.RunItem)
class RunItemAdmin(ViewOnlyAdmin):
    """A run's work list: written by the run's tasks only."""

    list_display = ["id", "run", "judge", "state", "attempts", "lease_until"]
    list_filter = ["state", "judge"]
    raw_id_fields = ["run", "response", "key_entry"]


@admin.register(m.PanelMember)
class PanelMemberAdmin(ViewOnlyAdmin):
    """The judge panel: changed with `manage.py panel --set` (audit-logged), never by hand."""

    list_display = ["benchmark", "judge", "prompt_version", "added_at"]
    list_filter = ["benchmark"]
    list_select_related = ["benchmark", "judge"]
