"""Triage: turn audit verdicts, judge flags and two detectors into exclusions and review items.

Methodology rules 3 and 4, and issue 4:

- both auditors adverse (`wrong`/`ungradeable`; SNAGLIST_AUDIT_EXCLUSION_RULE
  `any_adverse` = any combination, `same_verdict` = the same verdict) and independent
  (scoring.audit_rule.not_independent: different vendors, not the same backend and
  model) -> the question's
  effective key entry in the edition is excluded from scoring with reason `auditors_agree`
  (questions.models.AuditExclusion: it holds in the editions that use that entry, not in
  the original when a corrected edition is triaged, nor in an edition that corrects it);
- exactly one auditor adverse -> item `single_auditor_flag` (a single adverse opinion is
  not evidence: the question is not changed); every auditor adverse but no two
  independent -> the same item with every verdict and a note saying why;
- any judge flag -> item `judge_flag` (both judges flagging ranks highest);
- `consensus_against_key`: at least SNAGLIST_CONSENSUS_SHARE of the models that answered
  have the lowest grade of the scale as their agreed grade (rule 1; with a one-judge panel,
  that judge's grade), and each of those models scores at least
  SNAGLIST_CONSENSUS_MIN_MODEL_SCORE overall (rule 2) — the signature of an out-of-date
  key (the GPDO Class MA case). Rules 1-2 are not computed here: the grades are the
  leaderboard's (scoring.selectors.load_edition_grades) and the agreed grades and model
  scores come from engine (`agreed_grades`, `model_scores`), so triage's model
  scores are the leaderboard's;
- `superseded_citation`: a citation check failed (review.citation_checks, one evidence
  per failure, its "problem" says which): the cited document is unknown, superseded or
  withdrawn; the locator is not among its passages; the quote is not in the cited
  passage (naming the passages that hold it); a figure of the key answer is not stated
  in the cited passage (naming the passage's figures of that unit). Entries whose
  document has no indexed text are counted "not checked".

Re-running adds no duplicates: one item that is not closed per question, evidence unique
per item by fingerprint; a question whose closed item already carries the same evidence
is not queued again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction

from core.actions import Action
from core.services import audit_log
from engine import agreed_grades
from engine import model_scores as engine_model_scores
from questions.models import Benchmark, KeyEdition, Question
from questions.selectors import (
    key_entries_for_edition,
    latest_published_edition,
    scored_entries,
)
from review.citation_checks import citation_findings
from review.detectors.panel import panel_findings, panel_fired
from review.detectors.responses_agree import responses_agree_findings
from review.detectors.unparsed import unparsed_findings
from review.models import Evidence, ReviewItem, Source, fingerprint_of
from review.services import review_items_file
from scoring.audit_rule import (
    EXCLUDE,
    EXCLUSION_REASON,
    MIXED,
    NOT_INDEPENDENT,
    SINGLE,
    audit_decisions,
    exclusions_write,
)
from scoring.models import Grade, Judge
from scoring.selectors import load_edition_grades


def _judge_flags(
    benchmark: Benchmark, edition: KeyEdition, entry_ids: dict[int, int]
) -> dict[int, dict]:
    """Return {question pk: judge_flag detail} from the judges' flags on the entries (rule 3)."""
    judges = list(
        Judge.objects.filter(benchmark=benchmark, role=Judge.Role.JUDGE)
        .order_by("judge_id")
        .values_list("judge_id", flat=True)
    )
    flags: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for entry_id, model_id, judge_id, reason in (
        Grade.objects.filter(
            key_entry_id__in=list(entry_ids), judge__role=Judge.Role.JUDGE, flag=True
        )
        .order_by("response_id", "judge_id", "-created_at")
        .values_list("key_entry_id", "response__model__model_id", "judge__judge_id", "flag_reason")
    ):
        flags[entry_ids[entry_id]][judge_id].append(
            {"model": model_id, "reason": flag_reason_short(reason)}
        )
    return {
        qpk: {
            "judges": sorted(by_judge),
            "both_judges": len(judges) >= 2 and set(judges) <= set(by_judge),
            "flags": {j: sorted(v, key=lambda f: f["model"]) for j, v in sorted(by_judge.items())},
            "edition": edition.name,
        }
        for qpk, by_judge in flags.items()
    }


def _consensus_against_key(
    benchmark: Benchmark, by_model: dict[str, int | None], scores: dict[str, float]
) -> dict | None:
    """Return the consensus_against_key detail for one question, or None when it does not fire.

    `by_model`: {model_id: agreed grade or None} of the models that answered (engine
    `agreed_grades`); `scores`: the models' overall scores in percent (engine `model_scores`).
    """
    share = settings.SNAGLIST_CONSENSUS_SHARE
    floor = settings.SNAGLIST_CONSENSUS_MIN_MODEL_SCORE
    answered = len(by_model)
    against = sorted(
        m for m, v in by_model.items() if v == benchmark.grade_min and scores.get(m, 0) >= floor
    )
    if not answered or not against or len(against) / answered < share:
        return None
    return {
        "models": [{"model": m, "overall_score": scores[m]} for m in against],
        "share": round(len(against) / answered, 3),
        "threshold": share,
        "min_model_score": floor,
        "n_models": answered,
    }


def _audit_findings(
    edition: KeyEdition,
    entry_ids: dict[int, int],
    exclusions: dict[int, dict],
    items: dict[int, list[tuple[str, dict]]],
) -> None:
    """Rule 4 (scoring.audit_rule's one decision) for `findings`: fill `exclusions` and add
    single-auditor flags to `items` ({question pk: [(Source, detail)]}), in place."""
    for entry_id, decision in audit_decisions(entry_ids).items():
        qpk = entry_ids[entry_id]
        detail = {
            "verdicts": [
                {"auditor": a, "verdict": v, "rationale": r} for a, v, r in decision.verdicts
            ],
            "edition": edition.name,
        }
        if decision.outcome == EXCLUDE:
            exclusions[qpk] = detail
        elif decision.outcome == MIXED:
            detail["note"] = "every auditor adverse but with different verdicts (rule same_verdict)"
            items[qpk].append((Source.SINGLE_AUDITOR_FLAG, detail))
        elif decision.outcome == NOT_INDEPENDENT:
            detail["note"] = (
                "every auditor adverse, but not independent opinions (rule 4): "
                f"{decision.why_not_independent}"
            )
            items[qpk].append((Source.SINGLE_AUDITOR_FLAG, detail))
        elif decision.outcome == SINGLE:
            items[qpk].append((Source.SINGLE_AUDITOR_FLAG, detail))


def _consensus_findings(
    benchmark: Benchmark,
    edition: KeyEdition,
    table: Any,
    entries: dict[int, Any],
    labels: dict[int, str],
    items: dict[int, list[tuple[str, dict]]],
) -> dict[str, float]:
    """Detector 1 for `findings`: consensus against the key, added to `items` in place;
    return the model scores it used ({model_id: score %, 2 decimals}, the leaderboard's:
    rules 1-2 of the engine on `table`, the edition's grade table without the questions
    this triage excludes). `table` None (no grades) gives {} and adds nothing."""
    scores: dict[str, float] = {}
    if table is not None:
        scores = {m: round(v, 2) for m, v in engine_model_scores(table).items()}
        qpk_of = {qid: pk for pk, qid in labels.items()}
        per_question: dict[int, dict[str, int | None]] = defaultdict(dict)
        for (qid, model_id), value in agreed_grades(table).items():
            per_question[qpk_of[qid]][model_id] = value
        for qpk, by_model in per_question.items():
            if qpk in entries:
                consensus = _consensus_against_key(benchmark, by_model, scores)
                if consensus is not None:
                    items[qpk].append(
                        (Source.CONSENSUS_AGAINST_KEY, {**consensus, "edition": edition.name})
                    )
    return scores


def findings(benchmark: Benchmark, edition: KeyEdition) -> dict[str, Any]:
    """Compute what triage would do, without writing: exclusions and {question pk: [(source, detail)]}.

    Keys: "exclusions" and "exclusion_entries" ({question pk: detail / KeyEntry}),
    "items" ({question pk: [(Source, detail)]}), "labels" ({pk: question_id}), "scored"
    (set of question pks), "model_scores" ({model_id: score %, 2 decimals}, the
    leaderboard's), "citation_checks" (review.citation_checks summary: checked /
    not_checked / no_citation / failed by problem, over the edition's entries). A fixed number of queries: entries, verdicts, flags, the leaderboard's
    grade rows, sections.
    """
    entries = key_entries_for_edition(edition, select_related=("citation_document",))
    # Scored in this edition (questions.selectors.scored_entries): keyed, not removed,
    # its effective entry not excluded by audit.
    scored = set(scored_entries(edition, entries=entries))
    entries = {q: e for q, e in entries.items() if not e.removed}
    entry_ids = {e.pk: q for q, e in entries.items()}
    labels = dict(Question.objects.filter(benchmark=benchmark).values_list("pk", "question_id"))

    exclusions: dict[int, dict] = {}
    items: dict[int, list[tuple[str, dict]]] = defaultdict(list)

    # Rule 4: the one decision of scoring.audit_rule (the report counts the same).
    _audit_findings(edition, entry_ids, exclusions, items)

    # Questions this run excludes are not scored either: the detectors' model scores
    # (rule 2) must not count them, or a first triage and a re-run would disagree.
    scored -= set(exclusions)

    for qpk, detail in _judge_flags(benchmark, edition, entry_ids).items():
        items[qpk].append((Source.JUDGE_FLAG, detail))

    # Detector 1: consensus against the key. Rules 1-2 are the engine's, on the grades
    # the leaderboard uses (scoring.selectors.load_edition_grades: the judge panel at its
    # current prompt versions), so the model scores here are the leaderboard's.
    table = load_edition_grades(edition).table
    if table is not None:  # the panel below reads the same table
        table = table.without_questions(labels[q] for q in exclusions)
    scores = _consensus_findings(benchmark, edition, table, entries, labels, items)

    # Issue 27 detector: the panel of models, weighed by fitted reliability, against the
    # key (review/detectors/panel.py; answers, grades on any scale, or both).
    scored_entries_now = {q: e for q, e in entries.items() if q in scored and q not in exclusions}
    panel_hits, panel_every = panel_findings(scored_entries_now, table, labels)
    for qpk, detail in panel_hits:
        items[qpk].append((Source.PANEL_AGAINST_KEY, {**detail, "edition": edition.name}))
    # Issue 17 detectors (review/detectors/): responses agreeing on another answer.
    for qpk, detail in responses_agree_findings(entries, scores):
        items[qpk].append((Source.RESPONSES_AGREE_AGAINST_KEY, {**detail, "edition": edition.name}))
    for qpk, detail in unparsed_findings(edition):
        items[qpk].append((Source.UNPARSED_REPLIES, {**detail, "edition": edition.name}))

    # Detector 2: the citation checks (review.citation_checks), one evidence per failure.
    citation_failures, citation_summary = citation_findings(entries)
    for qpk, detail in citation_failures:
        items[qpk].append((Source.SUPERSEDED_CITATION, {**detail, "edition": edition.name}))

    # The panel's figure where it did not fire, on every item raised by other evidence read
    # off the same responses (consensus, the answers): review.priority then weighs those
    # responses once, by the panel's fitted Bayes factor, instead of by a fixed weight, so
    # such items are ordered by the evidence they hold (issue 27 item 3). It raises no item.
    response_kinds = {Source.CONSENSUS_AGAINST_KEY, Source.RESPONSES_AGREE_AGAINST_KEY}
    for qpk in sorted(set(items) & set(panel_every)):
        kinds = {source for source, _ in items[qpk]}
        if kinds & response_kinds and Source.PANEL_AGAINST_KEY not in kinds:
            items[qpk].append(
                (Source.PANEL_AGAINST_KEY, {**panel_every[qpk], "edition": edition.name})
            )

    return {
        "exclusions": {q: d for q, d in exclusions.items()},
        "exclusion_entries": {q: entries[q] for q in exclusions},
        "items": {q: v for q, v in items.items() if q in scored and q not in exclusions},
        "labels": labels,
        "scored": scored,
        "model_scores": scores,
        "citation_checks": citation_summary,
    }


def flag_reason_short(reason: str) -> str:
    return (reason or "").strip()[:300]


def triage_run(
    *, benchmark: Benchmark, edition: KeyEdition | None = None, user=None
) -> dict[str, Any]:
    """Apply the audit rules and the detectors to `edition` (default: latest published).

    Returns counts: {"benchmark", "edition", "excluded", "already_excluded",
    "items_created", "items_updated", "evidence_added", "skipped_closed", "by_source",
    "citation_checks" (see `findings`), "open_items"}. Raises review.errors.NotAllowedError when `user` may not run triage
    (user=None is the system: the command line and the post-audit task).
    """
    from review import permissions
    from review.errors import NotAllowedError, NotFoundError

    if user is not None and not permissions.can_run_triage(user):
        raise NotAllowedError("only an editor may run triage")
    edition = edition or latest_published_edition(benchmark)
    if edition is None:
        raise NotFoundError(f"benchmark {benchmark.name!r} has no published key edition")
    found = findings(benchmark, edition)
    counts: dict[str, Any] = {
        "benchmark": benchmark.name,
        "edition": edition.name,
        "excluded": 0,
        "already_excluded": 0,
        "items_created": 0,
        "items_updated": 0,
        "evidence_added": 0,
        "skipped_closed": 0,
        "by_source": {s.value: 0 for s in Source if s != Source.MANUAL},
        "citation_checks": found["citation_checks"],
    }
    questions = Question.objects.select_related("benchmark").in_bulk(
        list(found["exclusions"]) + list(found["items"])
    )
    # Evidence already on closed items: a reviewed question is not queued again for it.
    closed_fps: dict[int, set[str]] = defaultdict(set)
    for qpk, fp in Evidence.objects.filter(
        item__question_id__in=list(found["items"]), item__status__in=ReviewItem.CLOSED
    ).values_list("item__question_id", "fingerprint"):
        closed_fps[qpk].add(fp)

    with transaction.atomic():
        # Rule 4's one writer of exclusions: each new one logged with its verdicts.
        wanted = sorted(found["exclusions"].items())
        new = exclusions_write(
            entries=[(found["exclusion_entries"][qpk], detail) for qpk, detail in wanted],
            reason=EXCLUSION_REASON,
            user=user,
        )
        counts["excluded"] = len(new)
        counts["already_excluded"] = len(wanted) - len(new)
        to_file: dict[int, list[tuple[str, dict]]] = {}
        for qpk, found_items in sorted(found["items"].items()):
            raising = [(s, d) for s, d in found_items if panel_fired(s.value, d)]
            if all(fingerprint_of(s.value, d) in closed_fps[qpk] for s, d in raising):
                counts["skipped_closed"] += 1
                continue
            for source, _detail in raising:
                counts["by_source"][source.value] += 1
            to_file[qpk] = [(source.value, detail) for source, detail in found_items]
        # One writer for every item (review_items_file: the same items and log entries as
        # review_item_create per piece of evidence, in a fixed number of statements).
        for created, added in review_items_file(
            found=to_file, questions=questions, user=user
        ).values():
            counts["items_created"] += created
            counts["evidence_added"] += added
            counts["items_updated"] += int(bool(added) and not created)
        counts["open_items"] = (
            ReviewItem.objects.filter(benchmark=benchmark)
            .exclude(status__in=ReviewItem.CLOSED)
            .count()
        )
        audit_log(
            actor=user,
            action=Action.TRIAGE_RUN,
            target_type="key_edition",
            target_id=edition.pk,
            target_label=f"{benchmark.name}/{edition.name}",
            benchmark_name=benchmark.name,
            after=counts,
        )
    return counts
