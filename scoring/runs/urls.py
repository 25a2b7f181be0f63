"""Routes of re-scoring and key-audit runs: pages under /runs/, API under /api/scoring/runs/."""

from __future__ import annotations

from django.urls import path

from scoring.runs import api as runs_api
from scoring.runs import views as runs_views

urlpatterns = [
    path("runs/", runs_views.runs, name="runs"),
    path("runs/new/", runs_views.run_create, name="run-create"),
    path("runs/estimate/", runs_views.run_estimate, name="run-estimate"),
    path("runs/<int:pk>/", runs_views.run_detail, name="run-detail"),
    path("runs/<int:pk>/progress/", runs_views.run_progress, name="run-progress"),
    path("runs/<int:pk>/cancel/", runs_views.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/resume/", runs_views.run_resume, name="run-resume"),
    path("api/scoring/runs/", runs_api.RunListCreate.as_view(), name="api-runs"),
    path("api/scoring/runs/estimate/", runs_api.RunEstimate.as_view(), name="api-run-estimate"),
    path("api/scoring/runs/<int:pk>/", runs_api.RunDetail.as_view(), name="api-run-detail"),
    path("api/scoring/runs/<int:pk>/cancel/", runs_api.RunCancel.as_view(), name="api-run-cancel"),
    path("api/scoring/runs/<int:pk>/resume/", runs_api.RunResume.as_view(), name="api-run-resume"),
]
