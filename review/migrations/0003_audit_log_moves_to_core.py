"""The audit log model now belongs to core/ (core/migrations/0001): drop it from review's
state only. The table `review_auditlogentry`, its rows and its append-only trigger stay.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0002_audit_log_is_append_only"),
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditLogEntry")],
            database_operations=[],
        ),
    ]
