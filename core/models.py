"""The audit log: one append-only row per state change, written with the change."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.actions import action_label


class AuditLogEntry(models.Model):
    """One state change: who, what, on what, before and after. Append-only.

    No foreign key but the actor: log rows outlive what they describe, and the database
    refuses to update or delete them (trigger of review/migrations/0002; the table kept
    its name `review_auditlogentry` when the model moved here from review/). `action` is
    a value of core.actions.Action.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_label = models.CharField(max_length=150, help_text="Username, or 'system'.")
    action = models.CharField(max_length=50, db_index=True)
    target_type = models.CharField(max_length=50)
    target_id = models.CharField(max_length=50)
    target_label = models.CharField(max_length=300, blank=True)
    benchmark_name = models.CharField(max_length=100, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "review_auditlogentry"
        ordering = ["-created_at", "-id"]
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["target_type", "target_id"], name="auditlog_target_idx")]

    def __str__(self) -> str:
        return (
            f"{self.created_at:%d/%m/%Y %H:%M} {self.actor_label} {self.action} {self.target_label}"
        )

    @property
    def action_label(self) -> str:
        """The plain-English phrase for `action` (core.actions.Action's label)."""
        return action_label(self.action)
