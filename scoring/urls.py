"""Scoring pages and API: the leaderboard and report (board_urls), runs (runs_urls) and the
candidate panel (candidate_urls)."""

from __future__ import annotations

from scoring.board import candidate_urls
from scoring.board import urls as board_urls
from scoring.runs import urls as runs_urls

app_name = "scoring"
urlpatterns = [*board_urls.urlpatterns, *runs_urls.urlpatterns, *candidate_urls.urlpatterns]
