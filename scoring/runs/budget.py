"""A run's budget: a cost cap and/or a token cap, checked before each chunk sends its calls
(issue 20 item 4).

The check (`RunBudget.admit`, called by scoring.runs.services.chunks.settle_chunk for the pairs a
chunk is about to send) runs under a row lock on the run and admits the chunk only when

    spent + reserved + the chunk's estimate <= cap

- spent: the run's billed calls in the JudgeCall ledger, priced by scoring.runs.costs at the
  judges' live prices (tokens: input + output of the calls that reported usage);
- reserved: the estimates of the run's chunks admitted earlier whose calls are not all
  settled yet (ScoringRun.budget_reserved_*; a chunk adds its estimate when admitted and
  takes it off once its calls are settled, `release`);
- the chunk's estimate: scoring.runs.estimate.estimate_pairs of the chunk's pairs that will be
  sent (pairs already graded are settled as reused first and cost nothing).

A chunk that does not fit whole is cut to what is left (issue 30 item 13: a 500-pair chunk
was 24 % of a run, and a run stopped up to a chunk's cost below its cap): the longest
first part of its pairs that fits is admitted and sent, and once those are settled the run
is stopped (status "stopped", a note with the spend, the cap, what finishing the run would
cost and the cap that would finish it, an audit-log entry); when not even one pair fits it
is stopped before any call is started. So no call is half-recorded; chunks already sending
finish the calls they started (as on a cancel).
The exact guarantee: the estimates admitted never add up to more than the cap; the spend
can exceed the cap only by how much the admitted chunks' real usage exceeds their
estimates (in a run whose chunks go one after another: the last chunk's error only, since
each check reads the real spend of the chunks before it). Calls whose backend reports no
usage add nothing to `spent` (their usage is unknown, never 0 in the reports).

`rescore --resume --budget-cost Y` (scoring.runs.services.scoring_run_resume) raises the cap and
sends the stopped run again; a resume whose first chunk still does not fit is refused at
once with the same message (`refuse_if_over`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import F
from django.template.defaultfilters import pluralize
from django.utils import timezone

from core.actions import Action
from core.services import audit_log
from questions.errors import DomainError
from scoring.models import Judge, JudgeCall, RunItem, ScoringRun
from scoring.runs.costs import Prices, calls_cost, tokens_cost
from scoring.runs.estimate import Calibration, RunEstimate, combine, estimate_pairs

SIX_PLACES = Decimal("0.000001")


class BudgetError(DomainError):
    """A budget that cannot be set or checked (bad value, unpriced judge, mixed currencies),
    or a resume whose cap is still too low; the message says what and where."""


@dataclass(frozen=True)
class Spent:
    """What a run's billed calls cost so far: tokens (input + output, calls with usage) and
    cost (Decimal in the judges' currency; calls whose judge has no price add nothing)."""

    tokens: int
    cost: Decimal


def parse_budget(cost: Any = None, tokens: Any = None) -> tuple[Decimal | None, int | None]:
    """Return (cost cap, token cap) from user input (strings, numbers or None/"" = no cap).

    Raises BudgetError naming the field for a value that is not a non-negative number (cost,
    up to 6 decimal places) or a non-negative whole number (tokens).
    """
    cap_cost = cap_tokens = None
    if cost not in (None, ""):
        try:
            cap_cost = Decimal(str(cost).strip())
        except InvalidOperation:
            raise BudgetError(f"budget cost: {cost!r} is not a number") from None
        if not cap_cost.is_finite() or cap_cost < 0 or cap_cost != cap_cost.quantize(SIX_PLACES):
            raise BudgetError(
                f"budget cost: {cost!r} must be 0 or more, with at most 6 decimal places"
            )
    if tokens not in (None, ""):
        try:
            cap_tokens = int(str(tokens).strip().replace(",", "").replace("_", ""))
        except ValueError:
            raise BudgetError(f"budget tokens: {tokens!r} is not a whole number") from None
        if cap_tokens < 0:
            raise BudgetError(f"budget tokens: {tokens!r} must be 0 or more")
    return cap_cost, cap_tokens


def budget_currency(judges: Sequence[Judge]) -> str:
    """Return the one currency a cost cap over `judges` is in (their price currency).

    Raises BudgetError when a judge has no live input or output price (its spend could not
    be priced) or the judges' prices are in different currencies (a cap cannot mix them).
    """
    unpriced = [
        j.judge_id
        for j in judges
        if Prices.of(j, "live").input is None or Prices.of(j, "live").output is None
    ]
    if unpriced:
        raise BudgetError(
            f"a cost cap needs live prices: judge {', '.join(unpriced)} has none "
            "(set its prices, or give a token cap instead)"
        )
    currencies = sorted({j.price_currency for j in judges})
    if len(currencies) > 1:
        named = ", ".join(f"{j.judge_id} in {j.price_currency}" for j in judges)
        raise BudgetError(
            f"a cost cap cannot mix currencies: the judges are priced {named} "
            "(give a token cap, or run the judges separately)"
        )
    return currencies[0] if currencies else ""


def set_budget(
    *,
    run: ScoringRun,
    cost: Decimal | None,
    tokens: int | None,
    judges: Sequence[Judge],
    user: Any = None,
) -> None:
    """Give the run a cost and/or token cap (None: no cap of that kind) and audit-log it
    (Action.RUN_BUDGET_SET, caps before and after). Call inside the transaction that
    creates or resumes the run. Raises BudgetError as budget_currency."""
    currency = budget_currency(judges) if cost is not None else ""
    before = budget_state(run)
    run.budget_cost, run.budget_tokens, run.budget_currency = cost, tokens, currency
    ScoringRun.objects.filter(pk=run.pk).update(
        budget_cost=cost, budget_tokens=tokens, budget_currency=currency
    )
    audit_log(
        actor=user,
        action=Action.RUN_BUDGET_SET,
        target_type="run",
        target_id=run.pk,
        target_label=str(run),
        benchmark_name=run.benchmark.name,
        before=before if before != {"cost": None, "currency": "", "tokens": None} else None,
        after=budget_state(run),
    )


def budget_state(run: ScoringRun) -> dict[str, Any]:
    """Return the run's caps as JSON: {"cost": string or None, "currency", "tokens"}."""
    cost = None if run.budget_cost is None else f"{run.budget_cost.quantize(SIX_PLACES)}"
    return {"cost": cost, "currency": run.budget_currency, "tokens": run.budget_tokens}


def has_budget(run: ScoringRun) -> bool:
    """Return True when the run has a cost or token cap."""
    return run.budget_cost is not None or run.budget_tokens is not None


def spent(run: ScoringRun) -> Spent:
    """Return the run's spend so far from the JudgeCall ledger (scoring.runs.costs.calls_cost,
    live prices): two queries, one more when a judge read cached tokens it has no cached
    price for (they are then counted at its input price, never as free)."""
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    tokens = sum((j["input_tokens"] or 0) + (j["output_tokens"] or 0) for j in summary["judges"])
    cost = sum((Decimal(j["cost"]) for j in summary["judges"] if j["cost"]), Decimal(0))
    unpriced = [j for j in summary["judges"] if j["cost"] is None and j["input_tokens"]]
    if unpriced:
        judges = {
            j.judge_id: j
            for j in Judge.objects.filter(
                benchmark_id=run.benchmark_id, judge_id__in=[j["judge"] for j in unpriced]
            )
        }
        for row in unpriced:
            live = Prices.of(judges[row["judge"]], "live")
            fallback = Prices(live.input, live.cached_input or live.input, live.output, "")
            cost += tokens_cost(
                fallback,
                input_tokens=row["input_tokens"],
                cached_tokens=row["cached_tokens"] or 0,
                output_tokens=row["output_tokens"] or 0,
            ) or Decimal(0)
    return Spent(tokens, cost)


def over_budget(run: ScoringRun, estimate: RunEstimate, now: Spent | None = None) -> str:
    """Return why `estimate`'s calls do not fit in the run's budget ("" when they do): the
    run row (locked by the caller) gives the caps and the reservations, the ledger the
    spend (`now`, read when not given: spent)."""
    if not has_budget(run) or not estimate.calls:
        return ""
    now = spent(run) if now is None else now
    lines = []
    if run.budget_tokens is not None:
        need = estimate.tokens_in + estimate.tokens_out
        if now.tokens + run.budget_reserved_tokens + need > run.budget_tokens:
            lines.append(
                f"{now.tokens:,} tokens spent of the {run.budget_tokens:,}-token cap"
                + (
                    f" ({run.budget_reserved_tokens:,} held for calls in flight, part of them "
                    "spent already)"
                    if run.budget_reserved_tokens
                    else ""
                )
                + f"; the next {estimate.calls} call{pluralize(estimate.calls)} "
                + f"need{pluralize(estimate.calls, 's,')} about {need:,} tokens"
            )
    if run.budget_cost is not None:
        cur = run.budget_currency
        need_cost = estimate.cost_live
        if need_cost is None:
            lines.append(
                f"the cost cap cannot be checked: {estimate.cost_unknown_reason() or 'no price'}"
            )
        elif now.cost + run.budget_reserved_cost + need_cost > run.budget_cost:
            lines.append(
                f"{now.cost.quantize(SIX_PLACES)} {cur} spent of the "
                f"{run.budget_cost.quantize(SIX_PLACES)} {cur} cap"
                + (
                    f" ({run.budget_reserved_cost} {cur} held for calls in flight, part of it "
                    "spent already)"
                    if run.budget_reserved_cost
                    else ""
                )
                + f"; the next {estimate.calls} call{pluralize(estimate.calls)} "
                + f"cost{pluralize(estimate.calls, 's,')} about "
                f"{need_cost.quantize(SIX_PLACES, ROUND_UP)} {cur}"
            )
    return "; ".join(lines)


# The cap a stopped run's note offers is the spend plus the estimate of what is left, plus
# this share of that estimate: an estimate can run a little low (bench/README.md, "Cost"),
# and a resume whose cap is just short stops again a few pairs before the end.
FINISH_MARGIN = Decimal("0.05")


def _round_up(value: Decimal) -> Decimal:
    """Return money rounded up for a sentence and an offered cap: to a hundredth, or to
    4 decimal places below 1 (a small re-score), as scoring.runs.estimate's sentences show it."""
    return value.quantize(Decimal("0.01") if value >= 1 else Decimal("0.0001"), ROUND_UP)


def finish_offer(run: ScoringRun) -> dict[str, Any]:
    """Return what finishing a stopped (or stopping) run would cost and the caps that would
    finish it: {"pairs": its pending pairs, "cost": their live-price estimate (Decimal, or
    None when a price is missing), "tokens": their estimated input + output tokens,
    "cap_cost": spend + cost x (1 + FINISH_MARGIN) rounded up (_round_up; None without a
    cost cap or cost), "cap_tokens": spend + tokens x (1 + FINISH_MARGIN) rounded up (None
    without a token cap), "currency"}. The estimate is scoring.runs.estimate.estimate_pairs of
    the pending pairs (some may turn out graded meanwhile and be reused, costing nothing):
    their prompts are rendered, so this reads every pending pair once. Three queries and
    the estimate's."""
    items = list(
        RunItem.objects.filter(run=run, state=RunItem.State.PENDING)
        .select_related("judge", "key_entry__question", "key_entry__citation_document", "response")
        .order_by("id")
    )
    rows = [(i.judge, i.key_entry, i.response) for i in items]
    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    estimate = combine(estimate_pairs(rows, scale=scale)) if rows else None
    cost = estimate.cost_live if estimate else Decimal(0)
    tokens = estimate.tokens_in + estimate.tokens_out if estimate else 0
    now = spent(run)
    margin = 1 + FINISH_MARGIN
    cap_cost = None
    if run.budget_cost is not None and cost is not None:
        cap_cost = _round_up(now.cost + cost * margin)
    cap_tokens = None
    if run.budget_tokens is not None:
        cap_tokens = now.tokens + int((tokens * margin).to_integral_value(ROUND_UP))
    return {
        "pairs": len(rows),
        "cost": cost,
        "tokens": tokens,
        "cap_cost": cap_cost,
        "cap_tokens": cap_tokens,
        "currency": run.budget_currency,
    }


def finish_text(run: ScoringRun, offer: dict[str, Any]) -> str:
    """Return finish_offer's figures in a sentence for the stop note: "to finish: N pairs
    left, about X CUR (T tokens) more; resume with a cost cap of C CUR"."""
    cur = offer["currency"]
    if not offer["pairs"]:
        return "nothing is left to send: resume to close the run"
    cost = (
        f"about {_round_up(offer['cost'])} {cur}"
        if offer["cost"] is not None
        else "a cost unknown (a judge has no live price)"
    )
    caps = []
    if offer["cap_cost"] is not None:
        caps.append(f"a cost cap of {offer['cap_cost']} {cur}")
    if offer["cap_tokens"] is not None:
        caps.append(f"a token cap of {offer['cap_tokens']:,}")
    n = offer["pairs"]
    return (
        f"to finish: {n:,} pair{pluralize(n)} left, {cost} ({offer['tokens']:,} tokens) more"
        + (f"; resume with {' and '.join(caps)}" if caps else "")
        + f" (the estimate plus {FINISH_MARGIN:.0%})"
    )


def _offer_json(offer: dict[str, Any]) -> dict[str, Any]:
    """Return finish_offer's figures as JSON (money as 6-place strings, as budget_state;
    the offered cap as offered)."""

    def six(value: Decimal | None) -> str | None:
        return None if value is None else f"{value.quantize(SIX_PLACES)}"

    return {
        "pairs": offer["pairs"],
        "cost": six(offer["cost"]),
        "tokens": offer["tokens"],
        # as offered in the note (rounded up: _round_up), so a page can fill it in
        "cap_cost": None if offer["cap_cost"] is None else str(offer["cap_cost"]),
        "cap_tokens": offer["cap_tokens"],
    }


def last_finish_offer(run: ScoringRun) -> dict[str, Any] | None:
    """Return the finish offer (finish_offer's figures as JSON: _offer_json) written with the
    run's last stop at its budget, or None (never stopped at it, or stopped before issue 30
    item 13). One query: the audit log keeps it (a page need not render every pending
    pair's prompt again)."""
    from core.models import AuditLogEntry

    entry = (
        AuditLogEntry.objects.filter(
            action=Action.RUN_BUDGET_STOP, target_type="run", target_id=str(run.pk)
        )
        .order_by("-id")
        .values_list("after", flat=True)
        .first()
    )
    return (entry or {}).get("finish")


def stop_run(run: ScoringRun, reason: str) -> bool:
    """Stop an active run at its budget: status "stopped", a note (the reason, then what
    finishing would cost and the caps that would finish it: finish_offer), an audit-log
    entry (Action.RUN_BUDGET_STOP, by the system, with the offer under "finish"). Returns
    False when the run was no longer active. Call inside a transaction."""
    from scoring.runs.services.work import ACTIVE_STATUSES, append_note

    offer = finish_offer(run)
    note = (
        f"stopped at budget at {timezone.localtime():%H:%M:%S}: {reason}; {finish_text(run, offer)}"
    )
    changed = ScoringRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=ScoringRun.Status.STOPPED,
        finished_at=timezone.now(),
        error=append_note(run.error, note),
    )
    if changed:
        audit_log(
            actor=None,
            action=Action.RUN_BUDGET_STOP,
            target_type="run",
            target_id=run.pk,
            target_label=str(run),
            benchmark_name=run.benchmark.name,
            after={**budget_state(run), "reason": reason, "finish": _offer_json(offer)},
        )
    return bool(changed)


class RunBudget:
    """The budget check of one chunk: `admit(work)` before its calls are sent, `release()`
    once they are settled (settle_chunk calls both; see the module docstring)."""

    def __init__(self, run: ScoringRun) -> None:
        self.run = run
        self.calibrations: dict[int, Calibration] = {}
        self.reserved: tuple[int, Decimal] | None = None
        # the chunk's pairs left unsent when it was cut to what is left: the run stops at release
        self.cut: list[Any] = []

    def estimate(self, work: Sequence[Any]) -> RunEstimate:
        """Return the estimate of the work items' calls (scoring.runs.services.work.WorkItem)."""
        scale = list(self.run.benchmark.grade_scale or [0, 1, 2])
        rows = [(w.judge, w.key_entry, w.response) for w in work]
        return combine(estimate_pairs(rows, scale=scale, calibrations=self.calibrations))

    def _fitting(self, run: ScoringRun, work: Sequence[Any], now: Spent) -> int:
        """Return how many of the first work items fit in the budget (binary search over
        the estimates of the first k items; an estimate grows with k)."""
        low, high = 0, len(work) - 1  # all of them did not fit
        while low < high:
            mid = (low + high + 1) // 2
            if over_budget(run, self.estimate(work[:mid]), now):
                high = mid - 1
            else:
                low = mid
        return low

    def admit(self, work: Sequence[Any]) -> list[Any]:
        """Return the work items to send: all of them when their calls fit in the run's
        budget, else the longest first part that fits (the run is stopped once they are
        settled, at release), reserving their estimate; [] after stopping the run when not
        one fits (or it is not active)."""
        if not work or not has_budget(self.run):  # the run as its task loaded it
            return list(work)
        estimate = self.estimate(work)
        with transaction.atomic():
            run = (
                ScoringRun.objects.select_for_update()
                .select_related("benchmark")
                .get(pk=self.run.pk)
            )
            now = spent(run)
            reason = over_budget(run, estimate, now)
            if reason:
                fits = self._fitting(run, work, now)
                if not fits:
                    stop_run(run, reason)
                    return []
                self.cut = list(work[fits:])
                work, estimate = work[:fits], self.estimate(work[:fits])
            tokens = estimate.tokens_in + estimate.tokens_out
            cost = (estimate.cost_live or Decimal(0)).quantize(SIX_PLACES, ROUND_UP)
            ScoringRun.objects.filter(pk=run.pk).update(
                budget_reserved_tokens=F("budget_reserved_tokens") + tokens,
                budget_reserved_cost=F("budget_reserved_cost") + cost,
            )
            self.reserved = (tokens, cost)
        return list(work)

    def release(self) -> None:
        """Take the chunk's reservation off the run (its calls are settled or given up);
        stop the run when its chunk was cut to what was left of the budget."""
        if self.reserved is None:
            return
        tokens, cost = self.reserved
        self.reserved = None
        ScoringRun.objects.filter(pk=self.run.pk).update(
            budget_reserved_tokens=F("budget_reserved_tokens") - tokens,
            budget_reserved_cost=F("budget_reserved_cost") - cost,
        )
        if self.cut:
            with transaction.atomic():
                run = (
                    ScoringRun.objects.select_for_update()
                    .select_related("benchmark")
                    .get(pk=self.run.pk)
                )
                # calibrated afresh on the calls just made, as finish_offer's estimate of
                # the same pending pairs in the note is: one figure for them, not two
                self.calibrations = {}
                rest = self.estimate(self.cut)
                reason = over_budget(run, rest) or (
                    f"the chunk was cut to what was left of the budget; its other "
                    f"{rest.calls} call{pluralize(rest.calls, ' was,s were')} not sent"
                )
                stop_run(run, reason)


def clear_reservations(run_ids: Sequence[int]) -> None:
    """Zero the reservations of runs no chunk is sending for (a stalled run heal_runs sends
    again, a stopped run resumed): a chunk killed mid-way never released its own."""
    ScoringRun.objects.filter(pk__in=list(run_ids)).update(
        budget_reserved_tokens=0, budget_reserved_cost=0
    )


def refuse_if_over(run: ScoringRun, work: Sequence[Any]) -> None:
    """Raise BudgetError (the run stays stopped) when not even the first pair a resume
    would send (`work`: its first chunk's WorkItem-like rows) fits in the run's budget;
    the message gives the caps that would finish it (finish_offer)."""
    reason = over_budget(run, RunBudget(run).estimate(work[:1]))
    if reason:
        raise BudgetError(
            f"run {run.pk} would stop again at once: {reason}; {finish_text(run, finish_offer(run))}"
            " (--budget-cost / --budget-tokens)."
        )
