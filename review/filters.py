"""The one filter definition of each review list, shared by its page and its API endpoint.

`QueueFilters` for the review queue (review.views.queue, review.api.ReviewItemViewSet;
`review.selectors.queue_items` applies it) and `AuditLogFilter` for the audit log
(review.views.log, review.api.AuditLogViewSet). Both accept the same parameters on the
page and in the API, so a link copied from one works on the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import django_filters

from core.actions import Action
from core.models import AuditLogEntry
from review.models import ReviewItem, Source

TRUE_VALUES, FALSE_VALUES = ("true", "1", "yes"), ("false", "0", "no")


@dataclass
class QueueFilters:
    """The one filter definition of the review queue, for the page and the API alike.

    Parameters (query-string names, all optional, "" = not filtered): `benchmark` (name),
    `source` (a Source value; the item's first source or any evidence of that kind),
    `category` (category id), `status` (a ReviewItem status, or "all"; "" = every item
    that is not closed), `document` (doc id cited by the question's key entry in any
    edition), `assignee` ("me", "none" or a username), `q` (text in the question id or
    text), `open` ("true"/"false", also 1/0 and yes/no: only items not closed / closed).
    """

    benchmark: str = ""
    source: str = ""
    category: str = ""
    status: str = ""
    document: str = ""
    assignee: str = ""
    q: str = ""
    open: str = ""

    @classmethod
    def from_params(cls, params) -> QueueFilters:
        """Read the filters from a QueryDict or dict (values stripped, `open` lower-cased)."""
        filters = cls(**{f: (params.get(f) or "").strip() for f in cls.__dataclass_fields__})
        filters.open = filters.open.lower()
        return filters

    def problems(self) -> dict[str, list[str]]:
        """Return {parameter: [message]} for values outside the choices ({} when valid).

        The API answers 400 with them; the page lists what matches (nothing, for a bad
        status or source)."""
        out: dict[str, list[str]] = {}
        if self.status and self.status not in (*ReviewItem.Status.values, "all"):
            out["status"] = [f"{self.status!r} is not a status (or 'all')"]
        if self.source and self.source not in Source.values:
            out["source"] = [f"{self.source!r} is not a source"]
        if self.open and self.open not in (*TRUE_VALUES, *FALSE_VALUES):
            out["open"] = [f"{self.open!r} is not true or false"]
        return out

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


#: The page shows dates as 30/11/2026 (SHORT_DATE_FORMAT); 30/11/26 (the API accepted it
#: through the en-GB input formats) and ISO 2026-11-30 are accepted too.
LOG_DATE_INPUT_FORMATS = ["%d/%m/%Y", "%d/%m/%y", "%Y-%m-%d"]


class AuditLogFilter(django_filters.FilterSet):
    """The one filter definition of the audit log, for the page and the API alike.

    Parameters (exact matches, all optional): `actor` (actor label, a username or
    "system"), `action` (a core.actions.Action value), `target_type`, `target_id`, `benchmark_name`, and `date_from` /
    `date_to` (inclusive, by the entry's date; dd/mm/yyyy as the page shows, dd/mm/yy, or
    ISO yyyy-mm-dd). A value that is not a date is a form error: the API answers 400, the page
    applies the other filters and says which date it did not apply (`errors`). Newest
    first unless another queryset is given.
    """

    actor = django_filters.CharFilter(field_name="actor_label")
    # One of core.actions.Action: an unknown action is an error (400 from the API), not an
    # empty list that looks like "nothing happened".
    action = django_filters.ChoiceFilter(choices=Action.choices)
    date_from = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__gte", input_formats=LOG_DATE_INPUT_FORMATS
    )
    date_to = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__lte", input_formats=LOG_DATE_INPUT_FORMATS
    )

    class Meta:
        model = AuditLogEntry
        fields = ["actor", "action", "target_type", "target_id", "benchmark_name"]

    def __init__(self, data=None, queryset=None, **kwargs):
        if queryset is None:
            queryset = AuditLogEntry.objects.order_by("-created_at", "-id")
        super().__init__(data, queryset=queryset, **kwargs)
