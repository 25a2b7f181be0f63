"""Scoring pages and API: the leaderboard and report (board_urls) and runs (runs_urls)."""

from __future__ import annotations

from importlib import import_module

app_name = "scoring"
urlpatterns: list = []

for _module in ("scoring.board_urls", "scoring.runs_urls"):
    try:
        urlpatterns += import_module(_module).urlpatterns
    except ModuleNotFoundError as exc:  # that part is not installed yet
        if exc.name != _module:
            raise
