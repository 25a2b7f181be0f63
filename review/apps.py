from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review workflow"

    def ready(self) -> None:
        # Review's rows travel in bundles through core's registry: interchange, a peer,
        # may not import review (core/bundle_parts.py).
        from core.bundle_parts import register
        from review.bundle_history import PART

        register(PART)

        from review.page_cache import connect_signals

        connect_signals()
