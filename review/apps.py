from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review workflow"

    def ready(self) -> None:
        from review.page_cache import connect_signals

        connect_signals()
