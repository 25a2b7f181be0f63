"""The import-linter contracts cover the whole tree: a new module cannot slip past them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def test_the_pure_packages_may_import_no_app_of_ours():
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


def test_the_layers_contract_names_every_app():
    layers = _contracts()["layers"]["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    apps = {p.name for p in ROOT.iterdir() if (p / "apps.py").exists()} | {"config"}
    assert apps <= named
