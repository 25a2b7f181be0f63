"""Rule 4's exclusion by audit belongs to a key entry, not to a question.

It was a status on the question, so triage of a corrected edition changed the original
edition's figures (and a question excluded under the original key stayed excluded in an
edition that corrects its entry). Each excluded question's exclusion moves to the key
entry it was decided on:

1. the edition named by the triage's audit-log entry that excluded it (`question.exclude`,
   its `after.edition`): the question's effective entry in that edition;
2. else every entry of the question whose auditors' newest verdicts are all adverse (two
   or more auditors; rule 4 with SNAGLIST_AUDIT_EXCLUSION_RULE);
3. else its entry in the root edition (or its earliest entry).

Then the question's columns go.

On SQLite, removing the question's check constraint rebuilds its table, which drops the
table's triggers: the wording triggers of migration 0004 are installed again at the end.
"""

import importlib

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

_WORDING = importlib.import_module(
    "questions.migrations.0004_published_question_wording_is_immutable"
)


ADVERSE = {"wrong", "ungradeable"}


def _effective_entry(KeyEntry, KeyEdition, question_pk, edition_pk):
    """The question's entry in the edition or its nearest ancestor that has one, or None."""
    seen = set()
    while edition_pk is not None and edition_pk not in seen:
        seen.add(edition_pk)
        entry = KeyEntry.objects.filter(question_id=question_pk, edition_id=edition_pk).first()
        if entry is not None:
            return entry
        edition_pk = KeyEdition.objects.filter(pk=edition_pk).values_list("parent_id", flat=True)[0]
    return None


def _rule_four_entries(KeyEntry, AuditVerdict, question_pk, rule):
    """The question's entries whose auditors' newest verdicts are all adverse (two or more)."""
    out = []
    for entry in KeyEntry.objects.filter(question_id=question_pk).order_by("created_at", "id"):
        newest = {}
        for auditor_id, verdict in (
            AuditVerdict.objects.filter(key_entry_id=entry.pk, auditor__role="auditor")
            .order_by("-created_at", "-id")
            .values_list("auditor_id", "verdict")
        ):
            newest.setdefault(auditor_id, verdict)
        verdicts = list(newest.values())
        if len(verdicts) >= 2 and all(v in ADVERSE for v in verdicts):
            if rule == "any_adverse" or len(set(verdicts)) == 1:
                out.append(entry)
    return out


def move_exclusions_to_entries(apps, schema_editor):
    from django.conf import settings

    Question = apps.get_model("questions", "Question")
    KeyEntry = apps.get_model("questions", "KeyEntry")
    KeyEdition = apps.get_model("questions", "KeyEdition")
    AuditExclusion = apps.get_model("questions", "AuditExclusion")
    AuditVerdict = apps.get_model("scoring", "AuditVerdict")
    AuditLogEntry = apps.get_model("review", "AuditLogEntry")
    rule = getattr(settings, "SNAGLIST_AUDIT_EXCLUSION_RULE", "any_adverse")
    for question in Question.objects.filter(scoring_status="excluded").iterator():
        entries = []
        logged = (
            AuditLogEntry.objects.filter(
                action="question.exclude", target_type="question", target_id=str(question.pk)
            )
            .order_by("-created_at", "-id")
            .values_list("after", flat=True)
            .first()
        )
        name = (logged or {}).get("edition") if isinstance(logged, dict) else None
        edition = KeyEdition.objects.filter(
            benchmark_id=question.benchmark_id, name=name
        ).first() if name else None
        if edition is not None:
            found = _effective_entry(KeyEntry, KeyEdition, question.pk, edition.pk)
            entries = [found] if found is not None else []
        if not entries:
            entries = _rule_four_entries(KeyEntry, AuditVerdict, question.pk, rule)
        if not entries:
            ordered = KeyEntry.objects.filter(question_id=question.pk).order_by("created_at", "id")
            first = ordered.filter(edition__parent__isnull=True).first() or ordered.first()
            entries = [first] if first is not None else []
        for entry in entries:
            AuditExclusion.objects.get_or_create(
                key_entry_id=entry.pk,
                defaults={
                    "reason": question.excluded_reason or "auditors_agree",
                    "excluded_at": question.excluded_at or django.utils.timezone.now(),
                },
            )


def move_exclusions_back(apps, schema_editor):
    Question = apps.get_model("questions", "Question")
    AuditExclusion = apps.get_model("questions", "AuditExclusion")
    for exclusion in AuditExclusion.objects.select_related("key_entry").order_by("excluded_at"):
        Question.objects.filter(pk=exclusion.key_entry.question_id, scoring_status="scored").update(
            scoring_status="excluded",
            excluded_reason=exclusion.reason,
            excluded_at=exclusion.excluded_at,
        )


def reinstall_sqlite_wording_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in _WORDING.SQLITE_REVERSE + _WORDING.SQLITE_FORWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("questions", "0004_published_question_wording_is_immutable"),
        # read by the data step: the verdicts and the triage's audit-log entries
        ("scoring", "0004_fewer_indexes_and_room_for_hot_updates"),
        ("review", "0002_audit_log_is_append_only"),
    ]

    operations = [
        # Unapplied, this runs last: after the question's table is rebuilt again.
        migrations.RunPython(migrations.RunPython.noop, reinstall_sqlite_wording_triggers),
        migrations.CreateModel(
            name="AuditExclusion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("reason", models.CharField(max_length=50)),
                ("excluded_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "key_entry",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="exclusion",
                        to="questions.keyentry",
                    ),
                ),
            ],
            options={
                "ordering": ["key_entry"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("reason", ""), _negated=True),
                        name="auditexclusion_has_reason",
                    )
                ],
            },
        ),
        migrations.RunPython(move_exclusions_to_entries, move_exclusions_back),
        migrations.RemoveConstraint(
            model_name="question",
            name="question_exclusion_has_reason",
        ),
        migrations.RemoveField(
            model_name="question",
            name="excluded_at",
        ),
        migrations.RemoveField(
            model_name="question",
            name="excluded_reason",
        ),
        migrations.RemoveField(
            model_name="question",
            name="scoring_status",
        ),
        migrations.RunPython(reinstall_sqlite_wording_triggers, migrations.RunPython.noop),
    ]
