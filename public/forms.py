"""The reader's key-error report form (issue 22 item 3); the service re-checks every rule."""

from __future__ import annotations

from django import forms

from review.services.items import READER_SOURCE_MAX, REPORT_NOTE_MAX


class ReaderReportForm(forms.Form):
    """What is wrong, the source that says so, and an optional address for a reply."""

    what = forms.CharField(
        label="What is wrong with the key entry",
        max_length=REPORT_NOTE_MAX,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=f"Plain text, at most {REPORT_NOTE_MAX} characters.",
    )
    source_text = forms.CharField(
        label="The source that says so",
        max_length=READER_SOURCE_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The document, its edition and the clause, table or diagram; a link if it has one.",
    )
    email = forms.EmailField(
        label="Your email address (optional)",
        required=False,
        max_length=254,
        help_text="Only for a reply. Editors alone can see it; it is never published.",
    )
