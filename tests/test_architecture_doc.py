"""docs/architecture.md names only things that exist: a rename that forgets the page fails here.

Every backticked dotted name of our apps is imported (module, then attributes), every
`review:...` / `scoring:...` URL name reversed, every `/api/...` path resolved, every repo
path checked on disk and every management command named looked up. The table "Where each
rule of methodology.md lives" must have a row per rule 1-12 plus "effective key entry" and
"scored entries", each naming at least one function or class.
"""

from __future__ import annotations

import importlib
import re

import pytest
from django.core.management import get_commands
from django.urls import Resolver404, get_resolver, resolve

from tests.conftest import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "architecture.md"
APPS = ("core", "questions", "scoring", "interchange", "review", "config", "engine", "judges")
DOTTED = re.compile(rf"^(?:{'|'.join(APPS)})(?:\.[A-Za-z_]\w*)+$")
URL_NAME = re.compile(r"^(review|scoring):([\w-]+)$")
TOP_DIRS = (*APPS, "docs", "tests", "bench", "scripts", "templates", "static")
RULE_HEADING = "## Where each rule of methodology.md lives"


def _prose(text: str) -> str:
    """The page without its fenced code blocks (diagrams, not references)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def backticked(text: str) -> list[str]:
    """Return every `...` token of the prose, in order."""
    return re.findall(r"`([^`\n]+)`", _prose(text))


def task_names() -> set[str]:
    from config.celery import app

    importlib.import_module("scoring.runs.tasks")
    importlib.import_module("review.tasks")
    return set(app.tasks)


def resolve_dotted(name: str) -> object:
    """Import the longest module prefix of `name`, then get the remaining attributes.

    Raises LookupError saying which part is missing.
    """
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # this prefix is not a module: try a shorter one
            raise
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                raise LookupError(f"{name}: {'.'.join(parts[:i])} has no {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"{name}: no such module")


def missing_names(tokens: list[str], tasks: set[str]) -> list[str]:
    """Return one message per token that names a dotted name, URL, path or API route that
    does not exist."""
    resolver = get_resolver()
    problems = []
    for token in tokens:
        if DOTTED.match(token):
            if token in tasks:
                continue
            try:
                resolve_dotted(token)
            except LookupError as exc:
                problems.append(str(exc))
        elif m := URL_NAME.match(token):
            namespace, url_name = m.groups()
            if url_name not in resolver.namespace_dict[namespace][1].reverse_dict:
                problems.append(f"URL name {token} does not exist")
        elif m := re.search(r"(/api/[\w/-]*)", token):
            try:
                resolve(m.group(1))
            except Resolver404:
                problems.append(f"API path {m.group(1)} does not resolve")
        elif "/" in token and token.split("/")[0] in TOP_DIRS:
            if not (PROJECT_ROOT / token).exists():
                problems.append(f"path {token} does not exist")
    return problems


def rule_rows(text: str) -> dict[str, str]:
    """Return {rule cell: whole row} of the rule table."""
    section = text.split(RULE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("rule", "---"):
            rows[cells[0]] = line
    return rows


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_dotted_name_url_name_api_path_and_repo_path_in_the_page_exists(text):
    tokens = backticked(text)
    assert missing_names(tokens, task_names()) == []
    # The check really looked at the page's names, not at an empty list.
    assert sum(1 for t in tokens if DOTTED.match(t)) >= 80
    assert sum(1 for t in tokens if URL_NAME.match(t)) >= 20


def test_the_check_reports_names_that_no_longer_exist():
    gone = [
        "scoring.runs.services.grade_pair",  # removed with the one grading path
        "review.models.AuditLogEntry",  # the log moved to core
        "questions.bundles.importer",  # bundles moved to interchange
        "review:no_such_page",
        "scoring/runs/services.py",  # now a package
        "/api/no-such-thing/",
        "scoring.run_start",  # a task name checks against the registry, so this passes
    ]
    problems = missing_names(gone, task_names())
    assert len(problems) == 6, problems
    assert (
        problems[0] == "scoring.runs.services.grade_pair: scoring.runs.services has no 'grade_pair'"
    )
    assert "review.models has no 'AuditLogEntry'" in problems[1]
    # (a left-over questions/bundles/__pycache__ folder makes `questions.bundles` importable)
    assert problems[2] in (
        "questions.bundles.importer: questions has no 'bundles'",
        "questions.bundles.importer: questions.bundles has no 'importer'",
    )
    assert problems[3] == "URL name review:no_such_page does not exist"
    assert problems[4] == "path scoring/runs/services.py does not exist"
    assert problems[5] == "API path /api/no-such-thing/ does not resolve"


def test_rule_table_has_a_row_per_rule_each_naming_functions_that_exist(text):
    rows = rule_rows(text)
    labels = list(rows)
    wanted = ["effective key entry", "scored entries", *(str(n) for n in range(1, 13))]
    for label in wanted:
        hits = [row for key, row in rows.items() if key == label or key.startswith(f"{label} ")]
        assert len(hits) == 1, f"rule {label!r}: {len(hits)} rows in {labels}"
        names = [t for t in backticked(hits[0]) if DOTTED.match(t)]
        assert names, f"rule {label!r} names no function"
        for name in names:
            obj = resolve_dotted(name)
            assert callable(obj), f"rule {label!r}: {name} is not a function or class"
    assert len(rows) == 14


def test_commands_named_in_the_page_exist(text):
    prose = _prose(text)
    named = set()
    for group in re.findall(r"[Cc]ommands?\s((?:`[^`]+`(?:,?\s(?:or\s|and\s)?)?)+)", prose):
        named |= set(re.findall(r"`(\w+)[^`]*`", group))
    assert {"import_bundle", "triage", "audit_key", "rescore", "leaderboard"} <= named
    assert sorted(named - set(get_commands())) == []


def test_readme_links_the_architecture_page():
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Architecture" in readme
    assert "(docs/architecture.md)" in readme


def test_import_linter_contracts_named_in_the_page_are_the_configured_ones(text):
    import tomllib

    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    section = text.split("### The contracts that check it", 1)[1].split("\n##", 1)[0]
    for contract in contracts:
        label = contract.get("id") or contract["name"]
        assert label in section, f"contract {label!r} is not described"
    # layers, pure-packages, scoring-parts, two services layers (issue 29)
    assert len(contracts) == 5
