"""The import-linter contracts cover the whole tree: a new module cannot slip past them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def test_pure_scoring_forbids_every_other_scoring_module():
    """engine/ and judges/ may import nothing of scoring but themselves: the forbidden list
    names every other module of scoring/, so a new one must be added there (or this fails)."""
    forbidden = set(_contracts()["pure-scoring"]["forbidden_modules"])
    modules = {
        f"scoring.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "scoring").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    } - {"scoring.engine", "scoring.judges"}
    assert modules - forbidden == set()


def test_the_layers_contract_names_every_app():
    layers = _contracts()["layers"]["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    apps = {p.name for p in ROOT.iterdir() if (p / "apps.py").exists()} | {"config"}
    assert apps <= named
