"""Python/JSON literals as answers, CRUXEval-style (judges.answers)."""

from __future__ import annotations

import ast
import re

from .kinds import Answer


def _literal_value(text: str):
    """Return (True, value) when ``text`` is one Python/JSON literal, else (False, None)."""
    text = text.strip().strip("`").strip()
    if not text or len(text) > 5000:
        return False, None
    for candidate in (
        text,
        re.sub(
            r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", text))
        ),
    ):
        try:
            return True, ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return False, None


def _is_number(value) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


def _literal_answer(value) -> Answer:
    label = repr(value)
    return Answer("literal", label, label if len(label) <= 60 else label[:59] + "…")


_ASSERT_RE = re.compile(r"==\s*(.+?)\s*$", re.S)


def _literal(text: str, key_is_str: bool, whole: bool) -> Answer | None:
    """Read a literal from an explicit answer (``whole``) or from a sentence."""
    text = text.strip()
    m = _ASSERT_RE.search(text)
    candidates = [m.group(1)] if m and "assert" in text else []
    candidates += re.findall(r"`([^`]+)`", text)[::-1]
    if whole:
        candidates.insert(0, text)
    for cand in candidates:
        ok, value = _literal_value(cand.rstrip("."))
        if ok and not _is_number(value):
            return _literal_answer(value)
    if whole and key_is_str and text and "\n" not in text:
        return _literal_answer(text.strip("`").strip())
    return None
