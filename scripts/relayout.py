#!/usr/bin/env python3
"""Issue 29's mechanical changes as a codemod the lead can run again on a merged main.

    .venv/bin/python scripts/relayout.py names     # item 3: URL names and partial templates
    .venv/bin/python scripts/relayout.py layout    # item 1: engine/ and judges/ at the top,
                                                   # scoring/runs/ and scoring/board/
    .venv/bin/python scripts/relayout.py all

Each step moves files with `git mv` and rewrites every reference to what moved in the
tracked text files (Python, templates, Markdown, TOML, JavaScript, the Makefile), then
stops. It is idempotent: a file already moved is skipped, a reference already rewritten no
longer matches. Run `ruff check --fix . && ruff format .` (import order) and `make lint`
after it; review `git diff --stat`, then commit. Nothing here edits a migration's
operations: models stay in scoring, so no data moves (only migrations' imports of a moved
module are rewritten).

What each step does is listed in its constants (NAMES_*, LAYOUT_*), so a reader sees the
whole change without running it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".html", ".md", ".toml", ".js", ".txt", ".cfg", ".ini", ".yml", ".yaml"}
TEXT_NAMES = {"Makefile"}

# ------------------------------------------------------------------ step "names" (item 3)
# Partial templates (rendered alone for htmx or included) start with "_" everywhere, as
# review's always did.
NAMES_TEMPLATES = {
    "400_fragment.html": "_400.html",
    "403_fragment.html": "_403.html",
    "scoring/leaderboard_board.html": "scoring/_leaderboard_board.html",
    "scoring/report_body.html": "scoring/_report_body.html",
    "scoring/runs_estimate.html": "scoring/_runs_estimate.html",
    "scoring/runs_progress.html": "scoring/_runs_progress.html",
    "scoring/runs_status.html": "scoring/_runs_status.html",
    "scoring/runs_table.html": "scoring/_runs_table.html",
}
# URL names are kebab-case, the form DRF's routers give (`api-item-list`): every
# `name="a_b"` of a urls module becomes `name="a-b"`, and every "ns:a_b" reference with it.
NAMES_URL_MODULES = ("review", "scoring", "public", "config", "core")
# The snake_case names there were when this was written (references to them are rewritten
# even once their urls module is); any other snake_case name found in a urls module is too.
NAMES_URL_KNOWN = (
    "api_agreement api_leaderboard api_report edition_impact edition_key"
    " edition_preview_rescore edition_publish editions_index errata_csv errata_json"
    " leaderboard_csv leaderboard_index leaderboard_json progress_index proposal_approve"
    " proposal_reject proposals_approve report_error report_error_choose report_index"
    " report_json report_md report_problem report_spam"
).split()
NAMESPACES = ("review", "scoring", "public")
# Files that name routes without their namespace (the access matrix keys routes by their
# short name): every quoted old name in them is a URL name.
NAMES_BARE_FILES = ("tests/test_access_matrix.py",)

# ------------------------------------------------------------------ step "layout" (item 1)
# Whole packages and modules that move: (old dotted name, new dotted name). Packages first.
LAYOUT_MOVES: list[tuple[str, str]] = [
    # the pure parts: no Django, nothing of ours (contract pure-packages)
    ("scoring.engine", "engine"),
    ("scoring.judges", "judges"),
    # the run machinery: services, tasks, budget, costs, estimate, retries and its pages
    ("scoring.services", "scoring.runs.services"),
    ("scoring.tasks", "scoring.runs.tasks"),
    ("scoring.budget", "scoring.runs.budget"),
    ("scoring.costs", "scoring.runs.costs"),
    ("scoring.estimate", "scoring.runs.estimate"),
    ("scoring.retries", "scoring.runs.retries"),
    ("scoring.runs_views", "scoring.runs.views"),
    ("scoring.runs_api", "scoring.runs.api"),
    ("scoring.runs_selectors", "scoring.runs.selectors"),
    ("scoring.runs_urls", "scoring.runs.urls"),
    ("scoring.runs_permissions", "scoring.runs.permissions"),
    # the board: leaderboard, report, render, impact, their views and API
    ("scoring.board_views", "scoring.board.views"),
    ("scoring.board_urls", "scoring.board.urls"),
    ("scoring.api", "scoring.board.api"),
    ("scoring.report", "scoring.board.report"),
    ("scoring.render", "scoring.board.render"),
    ("scoring.impact", "scoring.board.impact"),
    ("scoring.spreadsheet", "scoring.board.spreadsheet"),
    ("scoring.judge_diagnostics", "scoring.board.judge_diagnostics"),
]
# New packages get an __init__.py with this docstring.
LAYOUT_PACKAGES = {
    "scoring/runs": (
        '"""Run machinery: re-scoring and key-audit runs, from the Runs page and API to the\n'
        "workers (services, tasks), with their budget, costs, estimate and retries.\n"
        'Above scoring\'s shared reads (scoring.selectors) and models; below scoring.board."""\n'
    ),
    "scoring/board": (
        '"""The board: leaderboard, methodology report, their rendering, the impact of a\n'
        "key correction, and their pages, downloads and API. Reads scoring.selectors and\n"
        'scoring.runs\' costs; nothing of scoring imports it."""\n'
    ),
}
# Celery task names stay as registered ("scoring.run_start" ...): every task passes
# name= explicitly, so a queued task still resolves after its module moved. Autodiscovery
# looks for `<app>.tasks`, which the move takes away: scoring/tasks.py stays as an import
# of scoring.runs.tasks (written below), the one shim of this change.
LAYOUT_TASKS_SHIM = (
    '"""Celery\'s autodiscovery imports `scoring.tasks`; the tasks live in scoring.runs.tasks\n'
    '(registered names unchanged: "scoring.run_start", ...)."""\n\n'
    "from scoring.runs import tasks  # noqa: F401\n"
)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def tracked_text_files() -> list[Path]:
    files = []
    for name in git("ls-files").splitlines():
        path = ROOT / name
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            files.append(path)
    return files


def rewrite(pattern: re.Pattern, replace, files: list[Path]) -> int:
    """Apply `pattern.sub(replace, text)` to every file; return the number changed."""
    changed = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = pattern.sub(replace, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def git_mv(old: Path, new: Path) -> bool:
    if not old.exists() or new.exists():
        return False
    new.parent.mkdir(parents=True, exist_ok=True)
    git("mv", str(old.relative_to(ROOT)), str(new.relative_to(ROOT)))
    return True


# ------------------------------------------------------------------ names


def step_names() -> None:
    for old, new in NAMES_TEMPLATES.items():
        git_mv(ROOT / "templates" / old, ROOT / "templates" / new)
    files = tracked_text_files()
    for old, new in NAMES_TEMPLATES.items():
        # a template name in quotes, backticks or parentheses, or a bare file name in prose
        pattern = re.compile(r"(?<![\w/.-])" + re.escape(old) + r"(?![\w-])")
        n = rewrite(pattern, new, files)
        print(f"template {old} -> {new}: {n} files")
    names: set[str] = set(NAMES_URL_KNOWN)
    url_files = [
        p
        for p in files
        if p.suffix == ".py"
        and p.parts[len(ROOT.parts)] in NAMES_URL_MODULES
        and (p.name == "urls.py" or p.name.endswith("_urls.py"))
    ]
    for path in url_files:
        names |= set(re.findall(r'\bname="([a-z0-9]+(?:_[a-z0-9]+)+)"', path.read_text()))
    for old in sorted(names):
        new = old.replace("_", "-")
        n = rewrite(re.compile(r'\bname="' + old + '"'), f'name="{new}"', url_files)
        ref = re.compile(r"(?<=[\"'`(])((?:" + "|".join(NAMESPACES) + r"):)" + old + r"(?=[\"'`)])")
        n += rewrite(ref, lambda m, new=new: m.group(1) + new, files)
        bare = re.compile(r"(?<=[\"'])" + old + r"(?=[\"'])")
        n += rewrite(bare, new, [ROOT / name for name in NAMES_BARE_FILES])
        print(f"url name {old} -> {new}: {n} files")


# ------------------------------------------------------------------ layout


def module_path(dotted: str) -> Path:
    base = ROOT / Path(*dotted.split("."))
    return base if base.is_dir() else base.with_suffix(".py")


def step_layout() -> None:
    for package, doc in LAYOUT_PACKAGES.items():
        init = ROOT / package / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(doc, encoding="utf-8")
            git("add", str(init.relative_to(ROOT)))
    for old, new in LAYOUT_MOVES:
        src = module_path(old)
        if src.is_dir():
            dst = ROOT / Path(*new.split("."))
        else:
            dst = (ROOT / Path(*new.split("."))).with_suffix(".py")
        moved = git_mv(src, dst)
        print(f"{old} -> {new}: {'moved' if moved else 'already there / absent'}")
    shim = ROOT / "scoring" / "tasks.py"
    if not shim.exists():
        shim.write_text(LAYOUT_TASKS_SHIM, encoding="utf-8")
        git("add", str(shim.relative_to(ROOT)))
    files = [p for p in tracked_text_files() if p != shim]
    # Longest names first, so scoring.services.runs is not half-rewritten by a shorter rule.
    for old, new in sorted(LAYOUT_MOVES, key=lambda m: -len(m[0])):
        dotted = re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])")
        n = rewrite(dotted, new, files)
        # `from scoring import services` style imports of a moved child
        parent, _, leaf = old.rpartition(".")
        new_parent, _, new_leaf = new.rpartition(".")
        if parent:
            from_import = re.compile(
                r"^(\s*)from " + re.escape(parent) + r" import " + re.escape(leaf) + r"\b",
                re.M,
            )
            target = f"from {new_parent} import {new_leaf}" if new_parent else f"import {new_leaf}"
            if new_leaf != leaf:
                target += f" as {leaf}"
            n += rewrite(from_import, lambda m, t=target: m.group(1) + t, files)
        # file paths in prose and configuration: scoring/engine/ -> engine/, etc.
        old_path = old.replace(".", "/")
        new_path = new.replace(".", "/")
        slash = re.compile(r"(?<![\w/.])" + re.escape(old_path) + r"(?=/|\.py\b)")
        n += rewrite(slash, new_path, files)
        print(f"references {old} -> {new}: {n} files")


def main(argv: list[str]) -> int:
    steps = {"names": [step_names], "layout": [step_layout], "all": [step_names, step_layout]}
    if len(argv) != 2 or argv[1] not in steps:
        print(__doc__)
        return 2
    for step in steps[argv[1]]:
        step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
