"""Build tests/data/citation-testset/: a bundle of key entries cut from real Approved Document text.

Run from the repository root: `.venv/bin/python scripts/build_citation_testset.py`. The
output is deterministic (no randomness: candidates are taken in document order).

Every entry's quote is a sentence of a numbered paragraph, verbatim in the source file
(checked: its folded form occurs in the folded file text) and in exactly one passage,
with at least one figure with a unit. Sound entries restate the sentence (every other one
with its metre lengths written in millimetres, so unit conversion is exercised). Planted
defects, each from a different paragraph than any sound entry:

- nonexistent_locator: the paragraph number is the chapter's last + 20 (no line of the
  file starts with it);
- wrong_paragraph: the locator is the next numbered paragraph's, quote and answer kept;
- wrong_figure: the answer's first figure is replaced by a number that does not occur in
  the passage's text at all (plain string test, not the checker's parser);
- wrong_condition: a condition word of the answer is inverted ("at least" -> "not more
  than", "should" -> "need not", ...), figures kept.

labels.json (beside the bundle, not part of it) maps question_id -> kind.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judges.figures import extract_figures  # noqa: E402
from questions.sources import fold, guess_document_meta, parse_sections  # noqa: E402

SOURCES = ROOT.parent / "shared" / "data" / "approved-documents"
OUT = ROOT / "tests" / "data" / "citation-testset"
FILES = [
    "Text-Approved_Document_B_vol_1-Content.txt",
    "Text-Approved_Document_C-Content.txt",
    "Text-Approved_Document_F_V1-Content.txt",
    "Text-Approved_Document_H-Content.txt",
    "Text-Approved_Document_J-Content.txt",
    "Text-Approved_Document_K-Content.txt",
    "Text-Approved_Document_M_vol_1-Content.txt",
    "Text-Approved_Document_G-Content.txt",
]
SOUND_PER_DOC = 6
PLANTS_PER_DOC = 2  # one of each of two kinds per document, kinds rotating
KINDS = ["nonexistent_locator", "wrong_paragraph", "wrong_figure", "wrong_condition"]
CONDITIONS = [
    ("at least", "not more than"),
    ("not more than", "at least"),
    ("not less than", "not more than"),
    ("a minimum of", "a maximum of"),
    ("a maximum of", "a minimum of"),
    ("should not", "should"),
    ("should", "need not"),
    ("more than", "less than"),
    ("less than", "more than"),
]
_SENTENCE = re.compile(r"(?<=[.;])\s+(?=[A-Za-z(])")
_PARA_LOC = re.compile(r"^\d{1,2}\.\d{1,3}$")


def _sentences(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENTENCE.split(flat) if 50 <= len(s.strip()) <= 260]


def _unit_figures(text: str):
    return [f for f in extract_figures(text) if f.dim is not None]


def _in_mm(sentence: str) -> str:
    """Rewrite the metre lengths of a sentence in millimetres ("1.1m" -> "1100mm")."""
    out, last = [], 0
    for f in _unit_figures(sentence):
        if f.unit == "m" and not f.in_range:
            out.append(sentence[last : f.start] + f"{f.value:g}mm")
            last = f.end
    return "".join(out) + sentence[last:]


def _candidates(path: Path):
    """Yield (doc meta, sections, section index, sentence) in document order."""
    raw = path.read_text(encoding="utf-8")
    folded_raw = fold(raw)
    meta = guess_document_meta(path.name, raw)
    sections = parse_sections(raw)
    folded = [fold(s.text) for s in sections]
    for i, sec in enumerate(sections):
        if not _PARA_LOC.match(sec.locator):
            continue
        for sentence in _sentences(sec.text):
            needle = fold(sentence)
            if needle not in folded_raw or sum(needle in f for f in folded) != 1:
                continue
            if not _unit_figures(sentence) or re.search(r"(?i)\b(table|diagram)\b", sentence):
                continue
            yield meta, sections, i, sentence
            break  # one sentence per paragraph


def _plant(kind: str, meta, sections, i: int, sentence: str) -> tuple[str, str] | None:
    """Return (locator, answer) of a planted defect of ``kind``, or None if it cannot be made."""
    sec = sections[i]
    if kind == "nonexistent_locator":
        chapter = sec.locator.split(".")[0]
        last = max(
            int(s.locator.split(".")[1]) for s in sections if s.locator.startswith(chapter + ".")
        )
        loc = f"{chapter}.{last + 20}"
        raw = (SOURCES / meta["filename"]).read_text(encoding="utf-8")
        return None if re.search(rf"(?m)^\s*{re.escape(loc)}\s", raw) else (loc, sentence)
    if kind == "wrong_paragraph":
        nxt = next((s for s in sections[i + 1 :] if _PARA_LOC.match(s.locator)), None)
        if nxt is None or fold(sentence) in fold(nxt.text):
            return None
        return nxt.locator, sentence
    if kind == "wrong_figure":
        fig = _unit_figures(sentence)[0]
        for factor in (2, 3, 5, 7):
            new = f"{fig.raw * factor:g}"
            if new not in sec.text:
                written = sentence[fig.start : fig.end]
                return sec.locator, sentence[: fig.start] + written.replace(
                    fig.written, new, 1
                ) + sentence[fig.end :]
        return None
    for old, new in CONDITIONS:
        m = re.search(rf"\b{old}\b", sentence)
        if m:
            return sec.locator, sentence[: m.start()] + new + sentence[m.end() :]
    return None


def build() -> tuple[list[dict], dict[str, str], list[dict]]:
    rows, labels, documents = [], {}, []
    plant_turn = 0
    for name in FILES:
        sound = plants = 0
        meta = None
        for meta, sections, i, sentence in _candidates(SOURCES / name):
            sec = sections[i]
            if sound < SOUND_PER_DOC:
                answer = _in_mm(sentence) if sound % 2 else sentence
                kind, loc = "sound", sec.locator
                sound += 1
            elif plants < PLANTS_PER_DOC:
                kind = KINDS[plant_turn % len(KINDS)]
                made = _plant(kind, meta, sections, i, sentence)
                if made is None:
                    continue
                loc, answer = made
                plants += 1
                plant_turn += 1
            else:
                break
            qid = f"CT{len(rows) + 1:03d}"
            labels[qid] = kind
            rows.append(
                {
                    "question_id": qid,
                    "category_id": "approved-documents",
                    "text": f"What does {meta['title']} say about this? ({sentence[:60]}…)",
                    "answer": answer,
                    "citation": {"doc_id": meta["doc_id"], "locator": loc, "quote": sentence},
                }
            )
        documents.append(meta)
    return rows, labels, documents


def main() -> None:
    rows, labels, documents = build()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "citation-testset",
        "version": "1.0",
        "description": "Key entries cut from the real Approved Document text, sound and with"
        " planted citation defects (scripts/build_citation_testset.py).",
        "license": "Contains public sector information licensed under the Open Government"
        " Licence v3.0 (Approved Documents, Crown copyright).",
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    with (OUT / "categories.csv").open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(
            [["category_id", "name"], ["approved-documents", "Approved Documents"]]
        )
    with (OUT / "documents.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "doc_id",
                "title",
                "short_title",
                "kind",
                "edition",
                "published",
                "status",
                "superseded_by",
                "url",
            ]
        )
        for m in documents:
            w.writerow(
                [
                    m["doc_id"],
                    m["title"],
                    m["doc_id"],
                    "approved_document",
                    m["edition"] or "",
                    "",
                    "current",
                    "",
                    "",
                ]
            )
    with (OUT / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    (OUT.parent / "citation-testset-labels.json").write_text(
        json.dumps(labels, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    counts: dict[str, int] = {}
    for kind in labels.values():
        counts[kind] = counts.get(kind, 0) + 1
    print(f"{len(rows)} entries in {OUT}: {counts}")


if __name__ == "__main__":
    main()
