"""Scoring pages and API: the leaderboard and report (board_urls) and runs (runs_urls)."""

from __future__ import annotations

from scoring import board_urls, runs_urls

app_name = "scoring"
urlpatterns = [*board_urls.urlpatterns, *runs_urls.urlpatterns]
