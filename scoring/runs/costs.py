"""What judge calls cost: tokens from the JudgeCall ledger times the prices an admin set on
each Judge row (issue 20). The one place the cost formula is written.

Money is Decimal throughout, in the currency of the judge's prices (Judge.price_currency);
a cost is None (shown "unknown") when a price it needs is empty. Calls whose usage the
backend did not report (NULL tokens: the offline reference judge) are counted as
`unknown_usage`, never priced as 0. Calls sent whose outcome is unknown (in flight, or in
flight at a kill) are not paid calls: they are counted apart, as `outcome_unknown`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.template.defaultfilters import pluralize

from scoring.models import Judge, JudgeCall

MILLION = Decimal(1_000_000)
# The calls counted as paid: answered (their reply is recorded, with the usage the vendor
# billed). A call in flight (written "started" before it went out) or in flight at a kill
# ("lost") is "sent, outcome unknown": it may or may not have reached the vendor (a worker
# killed before its request left, or after the reply came but before it was recorded), so
# it is counted apart, never as paid (issue 26 item 3: the ledger counted 614 paid calls
# where the server had received 566).
BILLED_OUTCOMES = (JudgeCall.Outcome.OK,)
UNKNOWN_OUTCOMES = (JudgeCall.Outcome.STARTED, JudgeCall.Outcome.LOST)
# Anthropic bills a 5-minute prompt-cache write at 1.25x the model's input price (its
# pricing page, "Prompt caching": 5m cache writes 1.25x base input, 1h writes 2x, cache
# hits 0.1x); the judges mark prefixes "ephemeral" (5 minutes). A rule of the vendor's
# pricing model, not a price: the prices themselves are the admin's, on the Judge row.
CACHE_WRITE_FACTOR = Decimal("1.25")


@dataclass(frozen=True)
class Prices:
    """One judge's prices per million tokens in one mode (live or batch); None = unknown."""

    input: Decimal | None
    cached_input: Decimal | None
    output: Decimal | None
    currency: str

    @classmethod
    def of(cls, judge: Judge, mode: str = "live") -> Prices:
        """Return the judge's `mode` prices ("live" or "batch"; ValueError otherwise)."""
        if mode not in ("live", "batch"):
            raise ValueError(f"price mode must be 'live' or 'batch', got {mode!r}")
        prefix = "" if mode == "live" else "batch_"
        return cls(
            input=getattr(judge, f"{prefix}price_input"),
            cached_input=getattr(judge, f"{prefix}price_cached_input"),
            output=getattr(judge, f"{prefix}price_output"),
            currency=judge.price_currency,
        )


def tokens_cost(
    prices: Prices,
    *,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    cache_write_tokens: int = 0,
) -> Decimal | None:
    """Return what these tokens cost at `prices`, or None when a price they need is empty.

    cost = (input - cached - cache writes) x input price + cache writes x input price x
    CACHE_WRITE_FACTOR + cached x cached-input price + output x output price, prices per
    million tokens (the vendors' published pricing model: OpenAI and Anthropic price
    uncached input, cached input and output separately, and Anthropic bills a 5-minute cache
    write at 1.25x the input price). input_tokens includes the cached and cache-write ones
    (judges.Usage: the same meaning for both vendors). OpenAI reports no cache
    writes (its caching is free to write), so they count 0 there. A price whose tokens are 0
    is not needed. Raises ValueError for negative counts or more cached plus cache-write
    tokens than input tokens.
    """
    counts = (input_tokens, cached_tokens, output_tokens, cache_write_tokens)
    if min(counts) < 0 or cached_tokens + cache_write_tokens > input_tokens:
        raise ValueError(
            f"bad token counts: input {input_tokens}, cached {cached_tokens}, "
            f"cache writes {cache_write_tokens}, output {output_tokens}"
        )
    write_price = None if prices.input is None else prices.input * CACHE_WRITE_FACTOR
    total = Decimal(0)
    for tokens, price in (
        (input_tokens - cached_tokens - cache_write_tokens, prices.input),
        (cache_write_tokens, write_price),
        (cached_tokens, prices.cached_input),
        (output_tokens, prices.output),
    ):
        if not tokens:
            continue
        if price is None:
            return None
        total += Decimal(tokens) * price / MILLION
    return total


def _usage_by_judge(calls: QuerySet) -> dict[int, dict[str, Any]]:
    """Return {judge pk: {"calls", "outcome_unknown", "known", "input", "cached", "writes",
    "output", "modes"}} over the billed calls among `calls` (one query; outcome_unknown: the
    calls sent whose outcome is unknown, UNKNOWN_OUTCOMES, counted apart and never priced); "modes" splits the tokens by how the
    calls were sent ({"live"|"batch": {"input", "cached", "writes", "output"}}) for pricing.
    known: calls with input and output tokens reported; a known call with no cached count
    (an OpenAI-compatible server without prompt_tokens_details) adds 0 cached, pricing all
    its input as uncached (the higher price: never an under-statement), and one with no
    cache-write count (OpenAI) 0 writes."""
    paid = Q(outcome__in=BILLED_OUTCOMES)
    known = paid & Q(input_tokens__isnull=False, output_tokens__isnull=False)
    rows = (
        calls.filter(outcome__in=BILLED_OUTCOMES + UNKNOWN_OUTCOMES)
        .values("judge_id", "mode")
        .annotate(
            n=Count("id", filter=paid),
            unknown=Count("id", filter=~paid),
            known=Count("id", filter=known),
            i=Sum("input_tokens", filter=known),
            c=Sum("cached_tokens", filter=known),
            w=Sum("cache_write_tokens", filter=known),
            o=Sum("output_tokens", filter=known),
        )
        .order_by()
    )
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        u = out.setdefault(
            r["judge_id"],
            {
                "calls": 0,
                "outcome_unknown": 0,
                "known": 0,
                "input": 0,
                "cached": 0,
                "writes": 0,
                "output": 0,
                "modes": {},
            },
        )
        tokens = _mode_tokens(r)
        u["calls"] += r["n"]
        u["outcome_unknown"] += r["unknown"]
        u["known"] += r["known"]
        for k, v in tokens.items():
            u[k] += v
        u["modes"][r["mode"]] = tokens
        u.setdefault("mode_calls", {})[r["mode"]] = (r["n"], r["known"])
    return out


def _by_mode(judge: Judge, u: dict[str, Any], mode: str | None) -> list[dict[str, Any]]:
    """Return a judge's figures split by how its calls were sent, when they were sent both
    ways ([] otherwise): [{"mode": "batch"|"live", "calls", "unknown_usage", token figures,
    "cost"}], each mode's tokens at its own prices (or `mode`'s when given)."""
    if len(u["modes"]) < 2:
        return []
    rows = []
    for sent in sorted(u["modes"]):
        t, (n, known) = u["modes"][sent], u["mode_calls"][sent]
        cost = _priced(judge, {sent: t}, mode) if known else None
        rows.append(
            {
                "mode": sent,
                "calls": n,
                "unknown_usage": n - known,
                **_tokens(t["input"], t["cached"], t["writes"], t["output"], known=known),
                "cost": money(cost),
            }
        )
    return rows


def _mode_tokens(row: dict[str, Any]) -> dict[str, int]:
    """Return one aggregate row's tokens ({"input", "cached", "writes", "output"})."""
    return {
        "input": row["i"] or 0,
        "cached": row["c"] or 0,
        "writes": row["w"] or 0,
        "output": row["o"] or 0,
    }


def _priced(judge: Judge, modes: dict[str, dict[str, int]], mode: str | None) -> Decimal | None:
    """Return the cost of a judge's tokens split by send mode ({"live"|"batch": {"input",
    "cached", "writes", "output"}}): each mode's tokens at that mode's prices (a batch call at the
    judge's batch prices), or all at `mode`'s prices when it is given; None when a price
    needed is empty. The one caller of tokens_cost for ledger rows."""
    total = Decimal(0)
    for sent, u in modes.items():
        cost = tokens_cost(
            Prices.of(judge, mode or sent),
            input_tokens=u["input"],
            cached_tokens=u["cached"],
            output_tokens=u["output"],
            cache_write_tokens=u["writes"],
        )
        if cost is None:
            return None
        total += cost
    return total


def money(value: Decimal | None) -> str | None:
    """Return a cost as a JSON-safe string (6 decimal places) or None: the one money format
    of the JSON outputs (API, CLI)."""
    return None if value is None else f"{value.quantize(Decimal('0.000001'))}"


def calls_cost(calls: QuerySet, *, mode: str | None = None) -> dict[str, Any]:
    """Return the tokens and cost of the billed calls among `calls` (a JudgeCall queryset),
    per judge and in total: each call at its judge's prices for the way it was sent
    (JudgeCall.mode: live, or batch at the batch prices), or every call at the `mode`
    ("live" | "batch") prices when `mode` is given (what the same calls would cost so).

    Shape: {"judges": [{"judge", "currency", "calls", "outcome_unknown", "unknown_usage",
    "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "cost",
    "by_mode"}], "calls",
    "outcome_unknown", "unknown_usage", "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens",
    "cost", "currency", "notes"} (cache_write_tokens: Anthropic's, priced by tokens_cost).
    calls: paid calls (BILLED_OUTCOMES: answered); outcome_unknown: calls sent whose outcome
    is unknown (UNKNOWN_OUTCOMES: in flight, or in flight at a kill), not in calls, tokens or
    cost; a judge with only those has a row with cost None. Token counts are over the calls whose usage is known (None when none of them reported
    usage); cost (a string, 6 decimal places, in `currency`) is None when no call reported usage or a needed price
    is empty, and the total is None when any judge's cost is unknown or the judges'
    currencies differ (notes say why). With some calls' usage unknown the cost covers the
    others only (a lower bound; `unknown_usage` and a note say so). by_mode: a judge's
    figures split by send mode when its calls went both ways (batch, and live: requests a
    batch brought no reply for, sent again live), else []. Two queries.
    """
    usage = _usage_by_judge(calls)
    judges = Judge.objects.in_bulk(list(usage))
    rows, notes, costs = [], [], []
    for pk in sorted(usage, key=lambda pk: judges[pk].judge_id):
        judge, u = judges[pk], usage[pk]
        cost = _priced(judge, u["modes"], mode)
        if not u["known"]:
            cost = None  # no call reported usage: the tokens, and so the cost, are unknown
        elif cost is None:
            wanted = mode or " or ".join(sorted(u["modes"]))
            notes.append(f"{judge.judge_id} has no {wanted} price for tokens it used")
        costs.append(cost)
        rows.append(
            {
                "judge": judge.judge_id,
                "currency": judge.price_currency,
                "calls": u["calls"],
                "outcome_unknown": u["outcome_unknown"],
                "unknown_usage": u["calls"] - u["known"],
                **_tokens(u["input"], u["cached"], u["writes"], u["output"], known=u["known"]),
                "cost": money(cost),
                "by_mode": _by_mode(judge, u, mode),
            }
        )
    # A judge whose cost is unknown has no say in the total's currency (the total is unknown).
    currencies = {r["currency"] for r in rows if r["cost"] is not None}
    total: Decimal | None = sum(costs, Decimal(0)) if None not in costs else None
    if len(currencies) > 1:
        notes.append("the judges' prices are in different currencies: no total")
        total = None
    unknown = sum(r["unknown_usage"] for r in rows)
    if unknown:
        notes.append(
            f"{unknown} paid call{pluralize(unknown)} reported no usage: not in the tokens or cost"
        )
    known = sum(usage[pk]["known"] for pk in usage)
    return {
        "judges": rows,
        "calls": sum(r["calls"] for r in rows),
        "outcome_unknown": sum(r["outcome_unknown"] for r in rows),
        "unknown_usage": unknown,
        **_tokens(
            *(sum(usage[pk][k] for pk in usage) for k in ("input", "cached", "writes", "output")),
            known=known,
        ),
        "cost": money(total),
        "currency": currencies.pop() if len(currencies) == 1 else "",
        "notes": notes,
    }


def _tokens(
    input_tokens: int, cached: int, writes: int, output: int, *, known: int
) -> dict[str, int | None]:
    """Return the token figures of a summary; None (unknown) when no call reported usage."""
    names = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens")
    if not known:
        return dict.fromkeys(names)
    return dict(zip(names, (input_tokens, cached, writes, output), strict=True))


def costs_of_runs(run_ids: list[int], *, mode: str | None = None) -> dict[int, dict[str, Any]]:
    """Return {run id: {"calls", "outcome_unknown", "unknown_usage", "cost", "currency"}} for
    the runs' billed calls (and, counted apart, their calls sent with outcome unknown;
    unknown_usage: the paid calls that reported no usage, left out of the cost, which is
    then partial, as in calls_cost), by the same rule as calls_cost (each call at its send mode's prices unless `mode` is given;
    cost None when usage or a needed price is unknown, or the run's judges are priced in
    different currencies). Runs with no call paid or sent are left out. Two queries whatever the
    number of runs (the runs list shows a column of it)."""
    paid = Q(outcome__in=BILLED_OUTCOMES)
    known = paid & Q(input_tokens__isnull=False, output_tokens__isnull=False)
    rows = list(
        JudgeCall.objects.filter(run_id__in=run_ids, outcome__in=BILLED_OUTCOMES + UNKNOWN_OUTCOMES)
        .values("run_id", "judge_id", "mode")
        .annotate(
            n=Count("id", filter=paid),
            unknown=Count("id", filter=~paid),
            known=Count("id", filter=known),
            i=Sum("input_tokens", filter=known),
            c=Sum("cached_tokens", filter=known),
            w=Sum("cache_write_tokens", filter=known),
            o=Sum("output_tokens", filter=known),
        )
        .order_by()
    )
    judges = Judge.objects.in_bulk({r["judge_id"] for r in rows})
    per: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        u = per.setdefault(
            (r["run_id"], r["judge_id"]), {"n": 0, "unknown": 0, "known": 0, "modes": {}}
        )
        u["n"] += r["n"]
        u["unknown"] += r["unknown"]
        u["known"] += r["known"]
        u["modes"][r["mode"]] = _mode_tokens(r)
    out: dict[int, dict[str, Any]] = {}
    totals: dict[int, list[Decimal | None]] = {}
    currencies: dict[int, set[str]] = {}
    for (run_id, judge_id), u in per.items():
        judge = judges[judge_id]
        cost = _priced(judge, u["modes"], mode) if u["known"] else None
        totals.setdefault(run_id, []).append(cost)
        currencies.setdefault(run_id, set())
        if cost is not None:  # as in calls_cost: only priced judges name the currency
            currencies[run_id].add(judge.price_currency)
        entry = out.setdefault(run_id, {"calls": 0, "outcome_unknown": 0, "unknown_usage": 0})
        entry["calls"] += u["n"]
        entry["outcome_unknown"] += u["unknown"]
        entry["unknown_usage"] += u["n"] - u["known"]
    for run_id, costs in totals.items():
        same = len(currencies[run_id]) <= 1
        total = sum(costs, Decimal(0)) if None not in costs and same else None
        out[run_id]["cost"] = money(total)
        out[run_id]["currency"] = next(iter(currencies[run_id]), "") if same else ""
    return out


def costs_markdown(costs: dict[str, Any]) -> list[str]:
    """Return the report's "Judge calls and cost" section as Markdown lines, from
    runs_selectors.edition_costs' {"spent", "paid_twice"}; unknown figures are written
    "unknown", never 0."""
    spent, twice = costs["spent"], costs["paid_twice"]
    md = ["", "## Judge calls and cost", ""]
    if not spent["judges"]:
        return [*md, "No judge call of this edition's runs is in the ledger."]

    def figure(value: Any, currency: str = "") -> str:
        return "unknown" if value is None else f"{value} {currency}".strip()

    md += [
        "| judge | calls paid | sent, outcome unknown | usage unknown | input tokens | cached "
        "| output tokens | cost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for j in spent["judges"]:
        md.append(
            f"| {j['judge']} | {j['calls']} | {j['outcome_unknown']} | {j['unknown_usage']} "
            f"| {figure(j['input_tokens'])} "
            f"| {figure(j['cached_tokens'])} | {figure(j['output_tokens'])} "
            f"| {figure(j['cost'], j['currency'])} |"
        )
    md += [
        "",
        f"Total: {figure(spent['cost'], spent['currency'])} for {spent['calls']} paid calls "
        f"({spent['outcome_unknown']} more sent, outcome unknown: not counted as paid), "
        f"at the prices set on each judge (batch prices for calls sent in a vendor batch). "
        f"Paid twice: "
        + (
            f"{twice['calls']} calls, {figure(twice['cost'], twice['currency'])}."
            if twice["calls"]
            else "none."
        ),
    ]
    return md + [f"- {n}" for n in spent["notes"]]
