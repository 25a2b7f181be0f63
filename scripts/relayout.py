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
# Whole packages and modules that move: (old dotted name, new dotted name).
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
    # the board: leaderboard, report, render, impact, their views, API and task
    ("scoring.board_views", "scoring.board.views"),
    ("scoring.board_urls", "scoring.board.urls"),
    ("scoring.board_tasks", "scoring.board.tasks"),
    ("scoring.api", "scoring.board.api"),
    ("scoring.report", "scoring.board.report"),
    ("scoring.render", "scoring.board.render"),
    ("scoring.impact", "scoring.board.impact"),
    ("scoring.judge_diagnostics", "scoring.board.judge_diagnostics"),
    # issue 31: the candidate panel's boards and pages, and the figures of judges against
    # people (read by the report; review's blind-grading pages call it from above)
    ("scoring.candidate_views", "scoring.board.candidate_views"),
    ("scoring.candidate_urls", "scoring.board.candidate_urls"),
    ("scoring.candidate", "scoring.board.candidate"),
    ("scoring.human", "scoring.board.human"),
]
# What stays at scoring's top, shared by both parts: the models (no data moves), the reads
# both parts make (selectors, completeness, refs), rule 4 (audit_rule), the CSV writer
# interchange and public use too (spreadsheet), the app, admin, commands, URLs root.
LAYOUT_SHARED = {
    "admin", "apps", "audit_rule", "completeness", "models", "refs", "selectors",
    "spreadsheet", "urls", "management", "migrations", "runs", "board", "__init__",
    "human_models", "human_bundle",
}  # fmt: skip
# Directories of data files that move with their package (old path, new path).
LAYOUT_DATA = [("scoring/prompts", "judges/prompt_templates")]
# New packages get an __init__.py with this docstring.
LAYOUT_PACKAGES = {
    "scoring/runs": (
        '"""Run machinery: re-scoring and key-audit runs, from the Runs page and API to the\n'
        "workers (services, tasks), with their budget, costs, estimate and retries.\n\n"
        "Below scoring.board (which reads the runs' costs); above scoring's shared reads\n"
        "(scoring.selectors) and models. Sends the board's refresh task by name.\n"
        '"""\n'
    ),
    "scoring/board": (
        '"""The board: leaderboard, methodology report, their rendering, the impact of a key\n'
        "correction, and their pages, downloads, API and cache-warming task.\n\n"
        "Reads scoring.selectors and what the runs know (costs, the latest run, who can\n"
        "grade: scoring.runs.costs, scoring.runs.selectors, scoring.runs.services.pairs);\n"
        "nothing else of scoring imports it but the URLs and commands.\n"
        '"""\n'
    ),
}
# Exact edits beside the renames: (file, old text, new text). Skipped when already made.
LAYOUT_EDITS = [
    (
        "judges/prompts.py",
        'PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"',
        'PROMPTS_DIR = Path(__file__).resolve().parent / "prompt_templates"',
    ),
    # Celery task names stay as registered ("scoring.run_start", ...: each task passes
    # name=), so queued messages still resolve; autodiscovery is told the two modules.
    (
        "config/celery.py",
        "# scoring's tasks live in two modules: the runs' (scoring.tasks) and the board's.\n"
        'app.autodiscover_tasks(["scoring"], related_name="board_tasks")\n',
        "# scoring's tasks live in its two parts (registered names unchanged: scoring.run_start).\n"
        'app.autodiscover_tasks(["scoring.runs", "scoring.board"])\n',
    ),
    (
        "Makefile",
        "APPS := config core questions review scoring public interchange manage.py",
        "APPS := config core questions review scoring public interchange engine judges manage.py",
    ),
    (
        "pyproject.toml",
        'root_packages = ["core", "questions", "scoring", "review", "interchange", "public", "config"]',
        'root_packages = [\n    "core", "questions", "scoring", "review", "interchange", "public", "config", "engine",\n'
        '    "judges",\n]',
    ),
    (
        "tests/test_architecture_doc.py",
        "    # layers, pure-scoring, two services layers (workflow-apps-independent went with the\n"
        "    # bundle-part registry in issue 29: interchange is above review in `layers` now)\n"
        "    assert len(contracts) == 4",
        "    # layers, pure-packages, scoring-parts, two services layers (issue 29)\n"
        "    assert len(contracts) == 5",
    ),
    (
        "tests/test_architecture_doc.py",
        'APPS = ("core", "questions", "scoring", "interchange", "review", "config")',
        'APPS = ("core", "questions", "scoring", "interchange", "review", "config", "engine", "judges")',
    ),
    (
        "tests/test_estimate.py",
        'PROMPTS = Path(__file__).resolve().parent.parent / "scoring" / "prompts"',
        'PROMPTS = Path(__file__).resolve().parent.parent / "judges" / "prompt_templates"',
    ),
]
# tests/test_layers.py: the pure-scoring test (every scoring module listed by hand) gives
# way to two tests of the new contracts.
LAYOUT_TEST_LAYERS_OLD = '''def test_pure_scoring_forbids_every_other_scoring_module():
    """engine/ and judges/ may import nothing of scoring but themselves: the forbidden list
    names every other module of scoring/, so a new one must be added there (or this fails)."""
    forbidden = set(_contracts()["pure-scoring"]["forbidden_modules"])
    modules = {
        f"scoring.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "scoring").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    } - {"engine", "judges"}
    assert modules - forbidden == set()
'''
LAYOUT_TEST_LAYERS_NEW = '''def test_the_pure_packages_may_import_no_app_of_ours():
    """engine/ and judges/ import nothing of ours: the contract forbids every app by its
    top-level name, so a new module anywhere is covered the day it is written."""
    contract = _contracts()["pure-packages"]
    apps = {p.name for p in ROOT.iterdir() if (p / "apps.py").exists()} | {"config"}
    assert set(contract["source_modules"]) == {"engine", "judges"}
    assert apps | {"django", "rest_framework", "celery"} <= set(contract["forbidden_modules"])


def test_the_scoring_parts_contract_places_every_part_of_scoring():
    """Every direct child of scoring/ (a module or a package: runs/, board/) is a layer of
    `scoring-parts`, so a new one must be given its place (or this fails)."""
    layers = _contracts()["scoring-parts"]["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    parts = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "scoring").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    } - {"apps", "migrations"}
    assert parts - named == set()
'''
LAYOUT_EDITS.append(("tests/test_layers.py", LAYOUT_TEST_LAYERS_OLD, LAYOUT_TEST_LAYERS_NEW))
# The cache holds pickles naming scoring.engine.*: a new cache VERSION, so a deploy of the
# move ignores them instead of failing to unpickle (seen on the access matrix's Redis db).
LAYOUT_EDITS.append(
    (
        "config/settings.py",
        """            "KEY_PREFIX": env.str("SNAGLIST_CACHE_PREFIX", default="snaglist"),
        }""",
        """            "KEY_PREFIX": env.str("SNAGLIST_CACHE_PREFIX", default="snaglist"),
            # Cached values are pickles that name their classes' modules: bump VERSION when a
            # cached class moves, or a deploy reads values it cannot unpickle (issue 29 moved
            # scoring.engine to engine/: ModuleNotFoundError on a board cached before).
            "VERSION": 2,
        }""",
    )
)
# The pure-scoring contract's hand-kept list gives way to two names, and scoring's parts
# get their own layers contract.
LAYOUT_CONTRACTS = """[[tool.importlinter.contracts]]
id = "pure-packages"
name = "engine and judges import no Django and nothing of ours"
type = "forbidden"
source_modules = ["engine", "judges"]
forbidden_modules = [
    "django",
    "rest_framework",
    "celery",
    "core",
    "questions",
    "scoring",
    "review",
    "interchange",
    "public",
    "config",
]

[[tool.importlinter.contracts]]
id = "scoring-parts"
name = "scoring: the board over the runs over the shared reads and models"
type = "layers"
containers = ["scoring"]
layers = [
    "urls | admin | management",
    "board",
    "runs",
    "audit_rule",
    "selectors",
    "completeness",
    "refs | spreadsheet | human_bundle",
    "models",
    "human_models",
]
ignore_imports = ["scoring.migrations.* -> *"]
"""


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def tracked_text_files() -> list[Path]:
    """Every tracked text file but this script (whose tables name the old paths)."""
    files = []
    for name in git("ls-files").splitlines():
        path = ROOT / name
        if path == Path(__file__).resolve():
            continue
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


MOVED = dict(LAYOUT_MOVES)
FROM_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<parent>[\w.]+) import (?P<names>[^\n(\\]+)$", re.M
)


def split_from_imports(text: str) -> str:
    """Rewrite `from scoring import services, runs_selectors as r` so that each moved name
    comes from its new parent (`from scoring.runs import services`, `import engine`)."""

    def one(m: re.Match) -> str:
        parent, indent = m.group("parent"), m.group("indent")
        names = [n.strip() for n in m.group("names").split("#")[0].split(",") if n.strip()]
        comment = ("  #" + m.group("names").split("#", 1)[1]) if "#" in m.group("names") else ""
        groups: dict[str, list[str]] = {}
        for item in names:
            name, _, alias = item.partition(" as ")
            name, alias = name.strip(), alias.strip()
            new = MOVED.get(f"{parent}.{name}")
            if new is None:
                groups.setdefault(parent, []).append(item)
                continue
            new_parent, _, leaf = new.rpartition(".")
            local = alias or name
            groups.setdefault(new_parent, []).append(
                leaf if leaf == local else f"{leaf} as {local}"
            )
        if list(groups) == [parent]:
            return m.group(0)
        out = []
        for new_parent, items in groups.items():
            if new_parent:
                out.append(f"{indent}from {new_parent} import {', '.join(items)}")
            else:
                out.extend(f"{indent}import {item}" for item in items)
        return "\n".join(out) + comment

    return FROM_IMPORT.sub(one, text)


def step_layout() -> None:
    for package, doc in LAYOUT_PACKAGES.items():
        init = ROOT / package / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(doc, encoding="utf-8")
            git("add", str(init.relative_to(ROOT)))
    for old, new in LAYOUT_MOVES:
        src = module_path(old)
        dst = ROOT / Path(*new.split("."))
        if not src.is_dir():
            dst = dst.with_suffix(".py")
        moved = git_mv(src, dst)
        print(f"{old} -> {new}: {'moved' if moved else 'already there or absent'}")
    for old, new in LAYOUT_DATA:
        print(f"{old}/ -> {new}/: {'moved' if git_mv(ROOT / old, ROOT / new) else 'already'}")
    for name, old, new in LAYOUT_EDITS:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        if old in text:
            path.write_text(text.replace(old, new), encoding="utf-8")
        elif new not in text:
            print(f"WARNING {name}: neither the old nor the new text is there; edit by hand")
    files = tracked_text_files()
    n = 0
    for path in files:
        if path.suffix != ".py":
            continue
        text = path.read_text(encoding="utf-8")
        new = split_from_imports(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            n += 1
    print(f"from-imports of moved modules: {n} files")
    # Longest names first, so that no shorter rule rewrites part of a longer name.
    for old, new in sorted(LAYOUT_MOVES, key=lambda m: -len(m[0])):
        dotted = re.compile(r"(?<![\w.])" + re.escape(old) + r"(?!\w)")
        n = rewrite(dotted, new, files)
        slash = re.compile(
            r"(?<![\w/.])" + re.escape(old.replace(".", "/")) + r"(?=/|\.py\b|[`'\s,;:)]|$)", re.M
        )
        n += rewrite(slash, new.replace(".", "/"), files)
        print(f"references {old} -> {new}: {n} files")
    for old, new in LAYOUT_DATA:
        rewrite(re.compile(r"(?<![\w/.])" + re.escape(old) + r"(?=/|\b)"), new, files)
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    block = re.compile(
        r'\[\[tool\.importlinter\.contracts\]\]\nid = "pure-scoring"\n.*?\]\n\n', re.S
    )
    if block.search(text):
        pyproject.write_text(block.sub(LAYOUT_CONTRACTS, text, count=1), encoding="utf-8")
    unplaced = sorted(
        p.stem if p.suffix == ".py" else p.name
        for p in (ROOT / "scoring").iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
        and (p.stem if p.suffix == ".py" else p.name) not in LAYOUT_SHARED
    )
    if unplaced:
        print("NOT PLACED (add to LAYOUT_MOVES or LAYOUT_SHARED):", ", ".join(unplaced))


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
