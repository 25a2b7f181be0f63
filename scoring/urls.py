"""Scoring pages and API: the leaderboard and report (board_urls), runs (runs_urls) and the
candidate panel (candidate_urls)."""

from __future__ import annotations

from scoring import board_urls, candidate_urls, runs_urls

app_name = "scoring"
urlpatterns = [*board_urls.urlpatterns, *runs_urls.urlpatterns, *candidate_urls.urlpatterns]
