"""Admin for judges, grades, audit verdicts and scoring runs. Secrets are never stored:
a judge names the environment variable that holds its key (`api_key_env`)."""

from __future__ import annotations

from django.contrib import admin

from questions.admin import ViewOnlyAdmin
from scoring import models as m


@admin.register(m.Judge)
class JudgeAdmin(admin.ModelAdmin):
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
