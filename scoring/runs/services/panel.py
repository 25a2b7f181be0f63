"""The judge panel of a benchmark: the one writer of `PanelMember` rows (methodology rule 12).

The panel is the set of judges, each at one prompt version, whose grades make the
benchmark's published figures. Changing it is an admin's decision and is audit-logged;
nothing else (adding a judge, importing grades, a new prompt version) changes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import content_cache
from core.actions import Action
from core.services import audit_log
from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark
from scoring.models import Judge, PanelMember


def parse_panel_spec(text: str) -> list[tuple[str, str | None]]:
    """Parse `ID[@PROMPT_VERSION],...` into [(judge_id, prompt_version or None)].

    Raises DomainError naming the empty or malformed item (1-based position).
    """
    members: list[tuple[str, str | None]] = []
    for pos, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        judge_id, sep, version = item.partition("@")
        judge_id, version = judge_id.strip(), version.strip()
        if not judge_id or (sep and not version):
            raise DomainError(
                f"panel item {pos} {raw!r}: expected JUDGE_ID or JUDGE_ID@PROMPT_VERSION"
            )
        members.append((judge_id, version or None))
    return members


def panel_state(benchmark: Benchmark) -> list[dict[str, str]]:
    """Return the panel as [{"judge": judge_id, "prompt_version": v}], sorted by judge id."""
    return [
        {"judge": jid, "prompt_version": pv}
        for jid, pv in PanelMember.objects.filter(benchmark=benchmark)
        .order_by("judge__judge_id")
        .values_list("judge__judge_id", "prompt_version")
    ]


def checked_members(
    benchmark: Benchmark, members: list[tuple[str, str | None]], panel: str
) -> tuple[dict[str, Judge], list[dict[str, str]]]:
    """Check `members` for a panel of `benchmark` and return ({judge id: Judge locked FOR
    UPDATE}, the members as [{"judge", "prompt_version"}] sorted by judge id, a version of
    None taken as the judge's current one). Call inside a transaction. `panel` names the
    panel in messages ("the judge panel", "a candidate panel"). Raises DomainError for no
    member, a judge named twice or an auditor, NotFoundError for a judge id the benchmark
    lacks: the one rule for judge panels and candidate panels alike."""
    if not members:
        raise DomainError(f"benchmark {benchmark.name!r}: {panel} needs at least one judge")
    ids = [jid for jid, _ in members]
    dupes = sorted({j for j in ids if ids.count(j) > 1})
    if dupes:
        raise DomainError(f"judge {', '.join(map(repr, dupes))} named twice in the panel")
    judges = {
        j.judge_id: j
        for j in Judge.objects.select_for_update().filter(benchmark=benchmark, judge_id__in=ids)
    }
    unknown = [j for j in ids if j not in judges]
    if unknown:
        raise NotFoundError(
            f"benchmark {benchmark.name!r} has no judge {', '.join(map(repr, unknown))}"
        )
    auditors = [j for j in ids if judges[j].role != Judge.Role.JUDGE]
    if auditors:
        raise DomainError(
            f"{', '.join(map(repr, auditors))} is an auditor, not a judge: "
            f"auditors check the key and cannot sit on {panel}"
        )
    after = sorted(
        ({"judge": jid, "prompt_version": pv or judges[jid].prompt_version} for jid, pv in members),
        key=lambda m: m["judge"],
    )
    return judges, after


def judge_panel_set(
    *,
    benchmark: Benchmark,
    members: list[tuple[str, str | None]],
    actor: Any = None,
) -> list[dict[str, str]]:
    """Replace the benchmark's judge panel with `members`; return the new panel.

    `members` is [(judge_id, prompt_version or None)]: None means the judge's current
    prompt version. Every judge must be a judge (role `judge`, not an auditor) of this
    benchmark, named once. Atomic; logs Action.JUDGE_PANEL_SET with the panel before and
    after (no entry when nothing changes). Raises NotFoundError for an unknown judge id and
    DomainError for an empty panel, a duplicate or an auditor.
    """
    with transaction.atomic():
        judges, after = checked_members(benchmark, members, "the judge panel")
        before = panel_state(benchmark)
        if before == after:
            return after
        PanelMember.objects.filter(benchmark=benchmark).delete()
        content_cache.bump(benchmark.pk, "panel")  # bulk_create sends no signal
        PanelMember.objects.bulk_create(
            PanelMember(
                benchmark=benchmark, judge=judges[m["judge"]], prompt_version=m["prompt_version"]
            )
            for m in after
        )
        audit_log(
            actor=actor,
            action=Action.JUDGE_PANEL_SET,
            target_type="benchmark",
            target_id=benchmark.pk,
            target_label=f"judge panel of {benchmark.name}",
            benchmark_name=benchmark.name,
            before=before,
            after=after,
        )
    return after
