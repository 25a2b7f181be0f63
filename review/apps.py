from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review workflow"

    def ready(self) -> None:
        from questions.signals import audit_exclusions_created
        from review.services import log_exclusions

        # Exclusions the bundle import makes (rule 4) get the same audit-log entry as
        # triage's; questions/ cannot import review/, so it signals.
        audit_exclusions_created.connect(log_exclusions, dispatch_uid="review.log_exclusions")
