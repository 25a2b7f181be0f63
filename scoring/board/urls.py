"""Leaderboard and report pages, their downloads, and the scoring API (namespace `scoring`).

The pages are read-only: they answer GET and HEAD only (405 otherwise).
"""

from __future__ import annotations

from django.urls import path
from django.views.decorators.http import require_safe

from scoring.board import api
from scoring.board import views as board_views

urlpatterns = [
    path("leaderboard/", require_safe(board_views.leaderboard_index), name="leaderboard-index"),
    path(
        "leaderboard/<slug:benchmark>/", require_safe(board_views.leaderboard), name="leaderboard"
    ),
    path(
        "leaderboard/<slug:benchmark>/leaderboard.csv",
        require_safe(board_views.leaderboard_csv_download),
        name="leaderboard-csv",
    ),
    path(
        "leaderboard/<slug:benchmark>/leaderboard.json",
        require_safe(board_views.leaderboard_json_download),
        name="leaderboard-json",
    ),
    path("report/", require_safe(board_views.report_index), name="report-index"),
    path("report/<slug:benchmark>/", require_safe(board_views.report), name="report"),
    path(
        "report/<slug:benchmark>/report.md",
        require_safe(board_views.report_md_download),
        name="report-md",
    ),
    path(
        "report/<slug:benchmark>/report.json",
        require_safe(board_views.report_json_download),
        name="report-json",
    ),
    path(
        "api/scoring/<slug:benchmark>/leaderboard/",
        api.LeaderboardApi.as_view(),
        name="api-leaderboard",
    ),
    path(
        "api/scoring/<slug:benchmark>/agreement/",
        api.AgreementApi.as_view(),
        name="api-agreement",
    ),
    path("api/scoring/<slug:benchmark>/report/", api.ReportApi.as_view(), name="api-report"),
]
