"""Forms of the review pages: they validate input shapes; services enforce the rules."""

from __future__ import annotations

from django import forms

from questions.models import KeyEntry
from review.models import CitationCheck, Proposal


class VersionedForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class CitationCheckForm(VersionedForm):
    """The citation check; ids are prefixed because it shares a page with the outcome form."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "check_%s")
        super().__init__(*args, **kwargs)

    locator_exists = forms.ChoiceField(
        label="Does the locator exist in that edition?",
        choices=CitationCheck.YesNo.choices,
        widget=forms.RadioSelect,
    )
    supports = forms.ChoiceField(
        label="Does the passage support the key answer?",
        choices=CitationCheck.Supports.choices,
        widget=forms.RadioSelect,
    )
    edition_in_force = forms.ChoiceField(
        label="Is that edition in force?",
        choices=CitationCheck.InForce.choices,
        widget=forms.RadioSelect,
    )
    # Each question's first answer is the one that bears the key out, so the panel's "1"
    # shortcut means the same on all four ("No": not amended since, first).
    amended = forms.ChoiceField(
        label="Amended or repealed since?",
        choices=[
            (CitationCheck.Amended.NO, CitationCheck.Amended.NO.label),
            (CitationCheck.Amended.YES, CitationCheck.Amended.YES.label),
            (CitationCheck.Amended.UNKNOWN, CitationCheck.Amended.UNKNOWN.label),
        ],
        widget=forms.RadioSelect,
    )
    note = forms.CharField(
        label="Evidence note", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    source_url = forms.URLField(
        label="Source URL (optional)", required=False, assume_scheme="https"
    )


class OutcomeForm(VersionedForm):
    """The outcome: confirm, correction or removal (ids prefixed, see CitationCheckForm)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "outcome_%s")
        super().__init__(*args, **kwargs)

    action = forms.ChoiceField(
        label="Outcome", choices=Proposal.Action.choices, widget=forms.RadioSelect
    )
    reason = forms.ChoiceField(
        label="Reason",
        choices=[("", "— choose a reason —"), *KeyEntry.Reason.choices],
        required=False,
    )
    answer = forms.CharField(
        label="Corrected answer", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    citation_doc_id = forms.CharField(label="Document id", required=False, max_length=100)
    citation_locator = forms.CharField(
        label="Locator (clause, table, diagram)", required=False, max_length=100
    )
    citation_quote = forms.CharField(
        label="Quote", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    note = forms.CharField(label="Note", required=False, widget=forms.Textarea(attrs={"rows": 2}))
    # Asked when confirming over standing evidence (review.services.standing_evidence).
    override_reason = forms.CharField(
        label="Why the key stands (one line)", required=False, max_length=200
    )


class DecidePanelForm(VersionedForm):
    """The decision panel (issue 18): the citation check and the outcome in one submit.

    Field names are those of CitationCheckForm and OutcomeForm; the one note goes with both
    the check and the proposal. `advance` (ticked by default on the page) opens the next
    claimable item afterwards; unticked, the page stays on this item. Ids are prefixed
    `decide_`. check_data() and outcome_data() split cleaned_data for
    review.services.item_decide.
    """

    CHECK_FIELDS = ("locator_exists", "supports", "edition_in_force", "amended")
    OUTCOME_FIELDS = (
        "action",
        "reason",
        "answer",
        "citation_doc_id",
        "citation_locator",
        "citation_quote",
        "override_reason",
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "decide_%s")
        super().__init__(*args, **kwargs)

    locator_exists = CitationCheckForm.base_fields["locator_exists"]
    supports = CitationCheckForm.base_fields["supports"]
    edition_in_force = CitationCheckForm.base_fields["edition_in_force"]
    amended = CitationCheckForm.base_fields["amended"]
    action = OutcomeForm.base_fields["action"]
    reason = OutcomeForm.base_fields["reason"]
    answer = OutcomeForm.base_fields["answer"]
    citation_doc_id = OutcomeForm.base_fields["citation_doc_id"]
    citation_locator = OutcomeForm.base_fields["citation_locator"]
    citation_quote = OutcomeForm.base_fields["citation_quote"]
    note = forms.CharField(
        label="Evidence note", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    override_reason = OutcomeForm.base_fields["override_reason"]
    advance = forms.BooleanField(label="Then open the next item", required=False)

    def check_data(self) -> dict[str, str]:
        data = self.cleaned_data
        return {**{f: data[f] for f in self.CHECK_FIELDS}, "note": data["note"]}

    def outcome_data(self) -> dict[str, str]:
        data = self.cleaned_data
        return {**{f: data[f] for f in self.OUTCOME_FIELDS}, "note": data["note"]}


class DecisionForm(forms.Form):
    comment = forms.CharField(
        label="Comment", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )


class ReassignForm(VersionedForm):
    assignee = forms.CharField(label="Reviewer's username", max_length=150)


def add_service_errors(form: forms.Form, errors: dict[str, list[str]]) -> None:
    """Put a service's InvalidInputError field errors next to the form's fields."""
    for name, messages in errors.items():
        for message in messages:
            form.add_error(name if name in form.fields else None, message)


class ReportProblemForm(forms.Form):
    """Report a problem with a key entry: which question, and what looks wrong."""

    question_id = forms.CharField(label="Question id", max_length=100)
    note = forms.CharField(
        label="What looks wrong?",
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text="Say what you found, e.g. the figure the cited passage gives. At most 2,000 characters.",
    )
