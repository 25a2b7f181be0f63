"""The public results site (namespace `public`): read-only pages under /public/ (issue 22).

GET and HEAD only (405 otherwise), except the key-error report form, which also takes POST. `config.middleware.LoginRequiredMiddleware` lets
anonymous visitors through to `/public/` and to `/public/<benchmark>/...` of a public
benchmark only.
"""

from __future__ import annotations

from django.urls import path
from django.views.decorators.http import require_http_methods, require_safe

from public import views

app_name = "public"
urlpatterns = [
    path("public/", require_safe(views.index), name="index"),
    path("public/<slug:benchmark>/", require_safe(views.leaderboard), name="leaderboard"),
    path(
        "public/<slug:benchmark>/leaderboard.csv",
        require_safe(views.leaderboard_csv),
        name="leaderboard-csv",
    ),
    path(
        "public/<slug:benchmark>/leaderboard.json",
        require_safe(views.leaderboard_json),
        name="leaderboard-json",
    ),
    path("public/<slug:benchmark>/report/", require_safe(views.report), name="report"),
    path("public/<slug:benchmark>/report.md", require_safe(views.report_md), name="report-md"),
    path(
        "public/<slug:benchmark>/report.json", require_safe(views.report_json), name="report-json"
    ),
    path("public/<slug:benchmark>/editions/", require_safe(views.editions), name="editions"),
    path("public/<slug:benchmark>/errata/", require_safe(views.errata), name="errata"),
    path(
        "public/<slug:benchmark>/errata.csv",
        require_safe(views.errata_download),
        {"fmt": "csv"},
        name="errata-csv",
    ),
    path(
        "public/<slug:benchmark>/errata.json",
        require_safe(views.errata_download),
        {"fmt": "json"},
        name="errata-json",
    ),
    path(
        "public/<slug:benchmark>/errata/<slug:edition>/<str:question>/",
        require_safe(views.erratum),
        name="erratum",
    ),
    path(
        "public/<slug:benchmark>/questions/report/",
        require_safe(views.report_error_choose),
        name="report-error-choose",
    ),
    path(
        "public/<slug:benchmark>/questions/<str:question>/report/",
        require_http_methods(["GET", "HEAD", "POST"])(views.report_error),
        name="report-error",
    ),
]
