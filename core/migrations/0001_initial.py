"""The audit log model moves here from review/ (state only: the table, its index and its
append-only trigger stay as review/migrations/0001-0002 made them, `review_auditlogentry`).

Runs after review/0002 so the table exists; review/0003 then drops the model from review's
state.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("review", "0002_audit_log_is_append_only"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditLogEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("actor_label", models.CharField(help_text="Username, or 'system'.", max_length=150)),
                        ("action", models.CharField(db_index=True, max_length=50)),
                        ("target_type", models.CharField(max_length=50)),
                        ("target_id", models.CharField(max_length=50)),
                        ("target_label", models.CharField(blank=True, max_length=300)),
                        ("benchmark_name", models.CharField(blank=True, max_length=100)),
                        ("before", models.JSONField(blank=True, null=True)),
                        ("after", models.JSONField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ("actor", models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "verbose_name": "audit log entry",
                        "verbose_name_plural": "audit log",
                        "ordering": ["-created_at", "-id"],
                        "db_table": "review_auditlogentry",
                        "indexes": [models.Index(fields=["target_type", "target_id"], name="auditlog_target_idx")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
