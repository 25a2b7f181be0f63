"""The board: leaderboard, methodology report, their rendering, the impact of a key
correction, and their pages, downloads, API and cache-warming task.

Reads scoring.selectors and what the runs know (costs, the latest run, who can
grade: scoring.runs.costs, scoring.runs.selectors, scoring.runs.services.pairs);
nothing else of scoring imports it but the URLs and commands.
"""
