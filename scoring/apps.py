from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Judges, grades and scores"

    def ready(self) -> None:
        # The blind human grades travel in bundles (issue 31 item 2): core.bundle_parts.
        from core.bundle_parts import register
        from scoring.human_bundle import HumanGradesPart

        register(HumanGradesPart())
