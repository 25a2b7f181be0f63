"""An offline, deterministic reference judge and auditor: a baseline heuristic, not an AI judge.

It needs no network and gives the same output for the same input. It exists so
the whole pipeline (two judges, agreement, flags, audits, re-scoring) runs and
can be tested without paying a vendor; its grades are not a substitute for two
model judges. Rules, applied in order (levels: wrong / partly right / right):

Judge
0. A key that is a choice (lettered, numbered or roman options), a literal, True/False,
   or a number given as an explicit answer ("The answer is 3.") is compared with the response's final answer as the
   one answer reader reads it (judges.answers): the same -> right, another
   -> wrong; when the response's answer cannot be read, the rules below decide.
1. Empty response -> wrong. A refusal ("I can't provide...") that states no
   figure and no yes/no -> wrong.
2. Yes/no (question opens "Is/Does/Can...", or the key opens "Yes"/"No"): a
   response of the opposite polarity -> wrong, whatever else it says.
3. Figures decide correctness when the key states any (methodology: "an answer
   that hedges but lands on the correct figure scores 2, a fluent answer with
   the wrong figure scores 0"). Each key figure is matched when the response
   states the same quantity (units converted: 1.1 m = 1100 mm) with a
   compatible limit direction (a "minimum" key figure stated as a "maximum"
   does not match). All key figures matched -> right; some -> partly right;
   none -> wrong. Hedging words and length change nothing.
4. A key figure the response says was removed/revoked/repealed in a named year
   does not count as matched, and the grade is flagged (rule 7).
5. A key with neither figures nor yes/no is compared by its significant terms
   (share of the key's terms found in the response: lenient >= 0.6 right,
   >= 0.3 partly right; strict >= 0.75 and >= 0.4). This is the weakest rule.
6. strictness "strict" costs one level (never below wrong) when the response
   cites a locator or document that differs from the key's (e.g. "Table 2.1"
   when the key cites "Table 4.1"; "Approved Document M" for "Approved
   Document K"), or, for a right answer, when it also states a competing
   figure of the same kind and direction that is not in the key ("900 mm or
   1100 mm"). "lenient" ignores both; a locator that is merely missing costs
   nothing at either. So two reference judges of different strictness disagree
   on some responses, as two model judges do.
7. flag=True when the response says, in a sentence with a year, that a
   requirement was removed/revoked/repealed/"no longer applies" and that
   sentence names a key figure or a key term, while the key still states a
   figure or a limit: the key may be out of date (methodology rule 11,
   e.g. the GPDO Class MA floorspace cap removed in March 2024).
Levels map onto the scale as min / median element (lower median) / max, so on
[0, 1, 2] they are 0 / 1 / 2 and on 1..10 they are 1 / 5 / 10.

Auditor (checks the key entry, sees no response)
- "ungradeable" when the key answer is empty, or the question asks for a
  figure ("how many", "what is the minimum...") and the key states none, or
  the question is yes/no and the key states neither yes/no nor a figure.
- "wrong" when the citation text states figures and none of the key answer's
  figures appears among them.
- otherwise "correct" (which only means these checks found nothing).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .answers import final_answer
from .base import JudgeBackend, JudgeConfig
from .figures import (
    Figure,
    document_family,
    extract_documents,
    extract_figures,
    extract_locators,
    is_refusal,
    is_yes_no_question,
    key_terms,
    polarity,
    revocation_claims,
)
from .types import AuditInput, AuditResult, GradeResult, GradingInput, validate_scale

REFERENCE_JUDGE_VERSION = "reference-judge-v1"
REFERENCE_AUDITOR_VERSION = "reference-auditor-v1"

WRONG, PARTIAL, RIGHT = 0, 1, 2
LEVEL_NAMES = {WRONG: "wrong", PARTIAL: "partly right", RIGHT: "right"}
TERM_THRESHOLDS = {"lenient": (0.6, 0.3), "strict": (0.75, 0.4)}

_ASKS_FIGURE_RE = re.compile(
    r"\bhow\s+(?:many|much|wide|high|tall|long|deep|thick|far|big|large|steep|often|soon|close)\b|"
    r"\bwhat\s+(?:is|are)\s+the\s+(?:minimum|maximum|min|max|required|permitted|recommended|"
    r"limiting|least|greatest)\b|"
    r"\bwhat\s+(?:minimum|maximum|width|height|depth|distance|area|length|thickness|percentage|"
    r"u-value|temperature|rate|number|gradient|pitch|headroom|period|size|dimension)\b|"
    r"\b(?:minimum|maximum)\s+(?:width|height|depth|distance|area|length|thickness|number|"
    r"floorspace|floor\s+area|travel\s+distance|u-value)\b",
    re.IGNORECASE,
)


def scale_levels(scale: list[int]) -> tuple[int, int, int]:
    """Return the grades for (wrong, partly right, right): min, lower-median element, max."""
    ordered = validate_scale(scale)
    return ordered[0], ordered[(len(ordered) - 1) // 2], ordered[-1]


@dataclass(frozen=True)
class _Assessment:
    level: int
    notes: list[str]
    flag: bool
    flag_reason: str


def _citation_reference(citation: str) -> str:
    """Return the reference part of a citation ("Approved Document B Vol 1 (2019) Table 4.1")."""
    head, sep, _ = (citation or "").partition(": ")
    return head if sep else citation or ""


def _citation_quote(citation: str) -> str:
    _, sep, quote = (citation or "").partition(": ")
    return quote if sep else citation or ""


def _plural(items: list[str]) -> str:
    return ", ".join(items)


class ReferenceBackend(JudgeBackend):
    """Grade and audit by the documented heuristics above; no network, fully deterministic."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.strictness = config.strictness

    def __repr__(self) -> str:
        return f"ReferenceBackend(strictness={self.strictness!r})"

    # -- judge -----------------------------------------------------------------------------

    def grade(self, inp: GradingInput) -> GradeResult:
        """Return the heuristic grade with a rationale naming what matched and what did not."""
        levels = scale_levels(inp.scale)
        assessment = self._assess(inp)
        grade = levels[assessment.level]
        rationale = "; ".join(assessment.notes) + f" -> {LEVEL_NAMES[assessment.level]}"
        raw = json.dumps(
            {
                "grade": grade,
                "rationale": rationale,
                "flag": assessment.flag,
                "flag_reason": assessment.flag_reason,
            },
            ensure_ascii=False,
        )
        return GradeResult(
            grade=grade,
            rationale=rationale,
            flag=assessment.flag,
            flag_reason=assessment.flag_reason,
            raw_output=raw,
            stop_reason="reference",
            prompt_version=f"{REFERENCE_JUDGE_VERSION}-{self.strictness}",
            parse_error=None,
        )

    def _assess(self, inp: GradingInput) -> _Assessment:
        response = (inp.response or "").strip()
        key = inp.key_answer or ""
        strict = self.strictness == "strict"
        if not response:
            return _Assessment(WRONG, ["empty response"], False, "")

        read = self._final_answers(inp.question or "", key, response)
        if read is not None:
            return read

        key_figs = extract_figures(key)
        resp_figs = extract_figures(response)
        yes_no = is_yes_no_question(inp.question) or polarity(key, infer=False) is not None
        key_pol = polarity(key, infer=True) if yes_no else None
        resp_pol = polarity(response, infer=True) if yes_no else None

        notes: list[str] = []
        # A corrected key may itself record that a figure was removed (Class MA after March
        # 2024): then a response saying so agrees with the key, and nothing is out of date.
        key_revoked = self._revoked_figures(key_figs, key)
        if key_revoked:
            flag, flag_reason = False, ""
        else:
            flag, flag_reason = self._out_of_date(key, key_figs, response)
        revoked = self._revoked_figures(key_figs, response)

        if is_refusal(response) and not resp_figs and resp_pol is None:
            return _Assessment(WRONG, ["refusal: no figure or answer given"], flag, flag_reason)

        if key_pol and resp_pol and key_pol != resp_pol:
            notes.append(f"answers {resp_pol!r} where the key says {key_pol!r}")
            return _Assessment(WRONG, notes, flag, flag_reason)

        if key_figs:
            level = self._grade_figures(key_figs, resp_figs, revoked, notes, key_revoked)
            if key_pol and resp_pol == key_pol:
                notes.append(f"{key_pol!r} matches")
        elif key_pol:
            if resp_pol == key_pol:
                notes.append(f"{key_pol!r} matches")
                level = RIGHT
            else:
                notes.append(f"no clear yes/no answer (key says {key_pol!r})")
                level = min(PARTIAL, self._grade_terms(key, response, notes, strict))
        else:
            level = self._grade_terms(key, response, notes, strict)

        penalties = self._locator_notes(inp, response, notes)
        if level == RIGHT and key_figs:
            penalties += self._competing_figures(key_figs, resp_figs, notes)
        if strict and penalties and level > WRONG:
            notes.append("strict: costs one level")
            level -= 1
        if flag:
            notes.append("key may be out of date (flagged)")
        return _Assessment(level, notes, flag, flag_reason)

    @staticmethod
    def _final_answers(question: str, key: str, response: str) -> _Assessment | None:
        """Rule 0: grade by the one answer reader (judges.answers) where it applies.

        It applies when the key is a choice (lettered, numbered or roman options), a
        literal or True/False, or a number stated as an explicit answer ("The answer is
        3.", a JSON answer, an <answer> tag, \\boxed{}), and the
        response's final answer of that kind can be read: the same -> right, another ->
        wrong. Otherwise (the key in prose, or the response unread) None: rules 1-7 decide.
        """
        k = final_answer(key, question=question, strict=True)
        if not k.is_read or k.ambiguous:
            return None
        if k.kind not in ("choice", "literal", "true_false") and not (
            k.kind == "number" and k.source in ("json", "tag", "boxed", "marker")
        ):
            return None
        key_is_str = k.kind == "literal" and str(k.value)[:1] in "'\""
        r = final_answer(
            response, question=question, kind=k.kind, unit=k.unit, key_is_str=key_is_str
        )
        if not r.is_read or r.ambiguous:
            return None
        if r.same_as(k):
            return _Assessment(RIGHT, [f"final answer {r.label} matches the key's"], False, "")
        return _Assessment(WRONG, [f"final answer {r.label}, the key's is {k.label}"], False, "")

    def _grade_figures(
        self,
        key_figs: list[Figure],
        resp_figs: list[Figure],
        revoked: list[Figure],
        notes: list[str],
        key_revoked: list[Figure] | None = None,
    ) -> int:
        matched = 0
        for kf in key_figs:
            same = [rf for rf in resp_figs if kf.matches(rf)]
            if key_revoked and kf in key_revoked:
                if kf in revoked:
                    matched += 1
                    notes.append(f"figure {kf.label()}: both say it no longer applies")
                elif same:
                    notes.append(
                        f"figure {kf.label()} stated as in force; the key says it no longer applies"
                    )
                else:
                    notes.append(f"removal of {kf.label()} not stated")
            elif kf in revoked:
                notes.append(
                    f"figure {kf.label()} named but the response says it no longer applies"
                )
            elif not same:
                notes.append(f"figure {kf.label()} not stated")
            elif all(rf.direction and kf.direction and rf.direction != kf.direction for rf in same):
                notes.append(
                    f"figure {kf.label()} stated as a {same[0].direction}imum, key says {kf.direction}imum"
                )
            else:
                matched += 1
                notes.append(f"figure {kf.label()} matches")
        if matched == 0:
            others = [
                rf.label()
                for rf in resp_figs
                if any(rf.dim == kf.dim for kf in key_figs)
                and not any(kf.matches(rf) for kf in key_figs)
            ]
            if others:
                notes.append(f"response states {_plural(others[:3])}")
            return WRONG
        return RIGHT if matched == len(key_figs) else PARTIAL

    def _grade_terms(self, key: str, response: str, notes: list[str], strict: bool) -> int:
        terms = key_terms(key)
        if not terms:
            notes.append("key has no figure, yes/no or distinctive term to compare")
            return PARTIAL
        found_terms = set(key_terms(response))
        hits = [t for t in terms if t in found_terms]
        share = len(hits) / len(terms)
        missing = [t for t in terms if t not in found_terms]
        notes.append(
            f"key terms found {len(hits)}/{len(terms)}"
            + (f" ({_plural(hits[:5])})" if hits else "")
            + (f"; missing {_plural(missing[:5])}" if missing else "")
        )
        right_at, partial_at = TERM_THRESHOLDS["strict" if strict else "lenient"]
        if share >= right_at:
            return RIGHT
        return PARTIAL if share >= partial_at else WRONG

    def _locator_notes(self, inp: GradingInput, response: str, notes: list[str]) -> int:
        """Name locator/document matches and mismatches; return 1 if the response cites a wrong one."""
        reference = f"{inp.key_answer}\n{_citation_reference(inp.citation_text)}"
        key_locs = extract_locators(reference)
        resp_locs = extract_locators(response)
        wrong = 0
        for kl in key_locs:
            same_kind = [rl for rl in resp_locs if rl.kind == kl.kind]
            if kl in resp_locs:
                notes.append(f"locator {kl.label()} matches")
            elif same_kind:
                notes.append(
                    f"locator {_plural([r.label() for r in same_kind])} cited, key cites {kl.label()}"
                )
                wrong = 1
            else:
                notes.append(f"locator {kl.label()} not mentioned")
        key_docs = extract_documents(reference)
        resp_docs = extract_documents(response)
        for family in dict.fromkeys(document_family(d) for d in key_docs):
            theirs = [d for d in resp_docs if document_family(d) == family]
            ours = [d for d in key_docs if document_family(d) == family]
            if theirs and not set(theirs) & set(ours):
                notes.append(f"cites {_plural(theirs)}, key cites {_plural(ours)}")
                wrong = 1
        return wrong

    def _competing_figures(
        self, key_figs: list[Figure], resp_figs: list[Figure], notes: list[str]
    ) -> int:
        """Note response figures of a key figure's kind and direction that the key does not state."""
        extra = [
            rf
            for rf in resp_figs
            if rf.dim is not None
            and not any(kf.matches(rf) for kf in key_figs)
            and any(
                kf.dim == rf.dim and (kf.direction == rf.direction or not rf.direction)
                for kf in key_figs
            )
        ]
        if not extra:
            return 0
        notes.append(f"also states {_plural([f.label() for f in extra[:3]])}, not in the key")
        return 1

    @staticmethod
    def _revoked_figures(key_figs: list[Figure], response: str) -> list[Figure]:
        out: list[Figure] = []
        for claim in revocation_claims(response):
            claim_figs = extract_figures(claim.sentence)
            out += [
                kf for kf in key_figs if any(kf.matches(cf) for cf in claim_figs) and kf not in out
            ]
        return out

    @staticmethod
    def _out_of_date(key: str, key_figs: list[Figure], response: str) -> tuple[bool, str]:
        states_limit = bool(key_figs) or bool(
            re.search(
                r"\b(?:limit|cap|maximum|minimum|must|required|not\s+permitted)\b",
                key,
                re.IGNORECASE,
            )
        )
        if not states_limit:
            return False, ""
        terms = set(key_terms(key))
        for claim in revocation_claims(response):
            claim_figs = extract_figures(claim.sentence)
            named = [kf for kf in key_figs if any(kf.matches(cf) for cf in claim_figs)]
            shared = [t for t in key_terms(claim.sentence) if t in terms and not t.isdigit()]
            if named or shared:
                what = (
                    f"the key's {_plural([f.label() for f in named])}"
                    if named
                    else f"'{_plural(shared[:3])}'"
                )
                return True, (
                    f'response says {what} no longer applies ({claim.when}): "{claim.sentence}"; '
                    "the key still states it - check whether it was amended or repealed"
                )
        return False, ""

    # -- auditor ---------------------------------------------------------------------------

    def audit(self, inp: AuditInput) -> AuditResult:
        """Return a verdict on the key entry by the baseline checks in the module docstring."""
        verdict, rationale = self._audit(inp)
        raw = json.dumps({"verdict": verdict, "rationale": rationale}, ensure_ascii=False)
        return AuditResult(
            verdict=verdict,  # type: ignore[arg-type]
            rationale=rationale,
            raw_output=raw,
            stop_reason="reference",
            prompt_version=REFERENCE_AUDITOR_VERSION,
            parse_error=None,
        )

    @staticmethod
    def _audit(inp: AuditInput) -> tuple[str, str]:
        key = (inp.key_answer or "").strip()
        if not key:
            return "ungradeable", "the key answer is empty"
        key_figs = extract_figures(key)
        key_pol = polarity(key, infer=True)
        if _ASKS_FIGURE_RE.search(inp.question or "") and not key_figs:
            return "ungradeable", "the question asks for a figure and the key answer states none"
        if is_yes_no_question(inp.question) and not key_figs and key_pol is None:
            return "ungradeable", "the question asks yes or no and the key answer says neither"
        cited = extract_figures(_citation_quote(inp.citation_text))
        if key_figs and cited:
            found = [kf for kf in key_figs if any(kf.matches(cf) for cf in cited)]
            if not found:
                return "wrong", (
                    f"the citation states {_plural([c.label() for c in cited[:5]])}; "
                    f"none of the key's figures ({_plural([k.label() for k in key_figs])}) appears in it"
                )
            return "correct", (
                f"key figure {_plural([k.label() for k in found])} appears in the citation "
                "(baseline check only)"
            )
        if not (inp.citation_text or "").strip():
            return "correct", "no citation text to check against (baseline check only)"
        return "correct", "no contradiction found between key and citation (baseline check only)"
