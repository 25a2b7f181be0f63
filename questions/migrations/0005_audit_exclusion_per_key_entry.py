"""Rule 4's exclusion by audit belongs to a key entry, not to a question.

It was a status on the question, so triage of a corrected edition changed the original
edition's figures (and a question excluded under the original key stayed excluded in an
edition that corrects its entry). Each excluded question's exclusion moves to its entry in
the root edition (the one its auditors' verdicts were given on by triage of the original
key), or, with no such entry, its earliest entry; then the question's columns go.

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


def move_exclusions_to_entries(apps, schema_editor):
    Question = apps.get_model("questions", "Question")
    KeyEntry = apps.get_model("questions", "KeyEntry")
    AuditExclusion = apps.get_model("questions", "AuditExclusion")
    excluded = Question.objects.filter(scoring_status="excluded")
    for question in excluded.iterator():
        entries = KeyEntry.objects.filter(question_id=question.pk).order_by("created_at", "id")
        entry = entries.filter(edition__parent__isnull=True).first() or entries.first()
        if entry is not None:
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
