from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0007_source_label_auditor_not_decisive"),
    ]

    operations = [
        migrations.AddField(
            model_name="proposal",
            name="override_reason",
            field=models.CharField(
                blank=True,
                help_text="One line: why the key was confirmed over standing evidence (issue 30).",
                max_length=200,
            ),
        ),
    ]
