"""The blind human grading sample (issue 31 item 2): samples, their responses, people's grades.

Imported by scoring.models, so Django finds the models in the scoring app. The draw and
the weighted figures are engine.human's; the writes are scoring.board.human's.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from questions.models import Benchmark, KeyEdition, KeyEntry, Response


class HumanSample(models.Model):
    """A random sample of responses for people to grade blind.

    Drawn once from the responses of `edition`'s scored questions, stratified by whether
    the judge panel disagreed (engine.human.draw_sample, seeded by `seed`); the
    strata's population and drawn counts are on each item, so the inverse-probability
    weight of every response is known without redrawing.
    """

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="human_samples")
    name = models.CharField(max_length=100)
    edition = models.ForeignKey(KeyEdition, on_delete=models.PROTECT, related_name="+")
    seed = models.IntegerField()
    size = models.PositiveIntegerField()
    disagree_share = models.FloatField()
    judges = models.JSONField(default=list, help_text="The judge panel the strata came from.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "name"], name="human_sample_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark.name} sample {self.name}"


class HumanSampleItem(models.Model):
    """One sampled response, graded against `key_entry` (the entry the judges graded)."""

    class Stratum(models.TextChoices):
        DISAGREE = "disagree", "Judges disagree"
        REST = "rest", "Judges agree, or a grade is missing or unparsed"

    sample = models.ForeignKey(HumanSample, on_delete=models.CASCADE, related_name="items")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    key_entry = models.ForeignKey(KeyEntry, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField()
    stratum = models.CharField(max_length=20, choices=Stratum.choices)
    stratum_population = models.PositiveIntegerField(help_text="N_h: responses in the stratum.")
    stratum_drawn = models.PositiveIntegerField(help_text="n_h: responses drawn from it.")

    class Meta:
        ordering = ["sample", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["sample", "response"], name="human_item_unique_response"
            ),
            models.UniqueConstraint(
                fields=["sample", "position"], name="human_item_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sample} #{self.position}"

    @property
    def weight(self) -> float:
        """The inverse-probability weight N_h / n_h."""
        return self.stratum_population / self.stratum_drawn


class HumanGrade(models.Model):
    """One person's blind grade of a sampled response, on the benchmark's grade scale."""

    item = models.ForeignKey(HumanSampleItem, on_delete=models.CASCADE, related_name="grades")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="human_grades"
    )
    grade = models.SmallIntegerField()
    note = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["item", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "reviewer"], name="human_grade_one_per_reviewer"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} gave {self.grade} to {self.item}"
