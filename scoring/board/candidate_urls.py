"""Routes of the candidate panel (issue 31): pages under /candidate/, API under
/api/scoring/<benchmark>/candidate/. Editors and admins only."""

from __future__ import annotations

from django.urls import path

from scoring.board import candidate_views

urlpatterns = [
    path("candidate/", candidate_views.candidate_index, name="candidate-index"),
    path("candidate/<slug:benchmark>/", candidate_views.candidate_page, name="candidate"),
    path(
        "candidate/<slug:benchmark>/action/",
        candidate_views.candidate_action,
        name="candidate-action",
    ),
    path(
        "api/scoring/<slug:benchmark>/candidate/",
        candidate_views.CandidateApi.as_view(),
        name="api-candidate",
    ),
]
