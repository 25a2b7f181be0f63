"""What a re-scoring or key-audit run would cost before it is started (issue 20 item 3).

The pairs come from the selectors a run uses (scoring.runs.services.pairs), the prompts from the
renderers the judges use (judges.prompts, inputs from scoring.runs.services.backends), and
the money from scoring.runs.costs (tokens_cost at Prices.of the judge): nothing here decides what
needs grading, what a judge sees or what a token costs.

No tokenizer ships with the product, so input tokens are the rendered prompt's characters
divided by a chars-per-token ratio. The ratio is calibrated per judge from its observed
calls (the JudgeCall ledger rows with usage: their input tokens over the characters of
their prompts, rendered again at the version each call was sent with), else
DEFAULT_CHARS_PER_TOKEN (4: OpenAI's rule of thumb for English text, "a token is about 4
characters"). Output tokens: the judge's observed mean per call, else its max_tokens (an
upper bound). Cached tokens and cache writes: the judge's observed shares of input on calls
sent at its current prompt_version (read from the cache; written to it, Anthropic's, priced
at scoring.runs.costs.CACHE_WRITE_FACTOR), else predicted from the prompts' layout and the calls
the run keeps in flight (predict_cached): how much of a prompt a vendor reads from its
cache depends on the layout (issue 20 item 7: judge-v2 puts the part shared by a
question's responses first, judge-v1 does not), so calls sent with another layout say
nothing about it; and a vendor makes a prefix readable only once the first request
carrying it has been answered, so the calls of a question sent together all miss (issue
30 item 12). Prompts are rendered at the judge's own
prompt_version, as its backend renders them. Every estimate says which of these it used
(`basis`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from questions.models import KeyEdition, KeyEntry, Response
from scoring.models import Judge, JudgeCall, ScoringRun
from scoring.runs.costs import Prices, money, tokens_cost
from scoring.runs.services.backends import (
    audit_input,
    grading_input_for,
    judge_backend_config,
    template_of,
)
from scoring.runs.services.pairs import audit_needed_pairs, graders_for, rescore_needed_pairs
from scoring.runs.services.tunables import judge_window

# OpenAI's rule of thumb for English text ("What are tokens and how to count them?"):
# a token is about 4 characters. Used until a judge has calls with usage to calibrate from.
DEFAULT_CHARS_PER_TOKEN = 4.0
# The judge's newest answered calls with usage that calibrate its ratios.
CALIBRATION_CALLS = 200
NO_GRADER_NOTE = "no judge can grade: each one given was skipped"
RETRIES_NOTE = (
    "calls = pairs, re-asks of stored unparsed replies included; calls asked again while "
    "the run goes (rate limits, cut-off or newly unparsed replies) are not, so a run can "
    "make a few more"
)


class Calibration(NamedTuple):
    """A judge's token ratios: chars_per_token (prompt characters a token), out_per_call
    (output tokens a call), cached_share (fraction 0-1 of input tokens read from the cache,
    as observed at the judge's prompt version; None when no call there says: then the
    cache is predicted, predict_cached), basis (how they were found, in words),
    write_share (fraction 0-1 of input tokens written to the cache on those calls:
    Anthropic's cache_creation_input_tokens; 0 for a vendor that reports none)."""

    chars_per_token: float
    out_per_call: float
    cached_share: float | None
    basis: str
    write_share: float = 0.0


@dataclass(frozen=True)
class JudgeEstimate:
    """One judge's share of a run: pairs to send, calls, tokens and cost (live and batch
    prices, Decimal in `currency`; None when a price the tokens need is empty)."""

    judge: str
    pairs: int
    calls: int
    tokens_in: int
    tokens_cached: int
    tokens_out: int
    cost_live: Decimal | None
    cost_batch: Decimal | None
    currency: str
    basis: str


@dataclass(frozen=True)
class RunEstimate:
    """A run's estimate: pairs needed, calls, tokens (input includes the cached ones) and
    cost, in total and per judge; a total cost is None when a judge's is unknown or the
    judges' currencies differ (notes say which)."""

    needed: int
    calls: int
    tokens_in: int
    tokens_cached: int
    tokens_out: int
    cost_live: Decimal | None
    cost_batch: Decimal | None
    judges: list[JudgeEstimate]
    notes: list[str] = field(default_factory=list)
    currency: str = ""

    def as_json(self) -> dict[str, Any]:
        """Return the cli.md `--dry-run` shape: counts as ints, money as strings with 6
        decimal places (as scoring.runs.costs), None where unknown; `judges` per judge."""
        out = asdict(self)
        for row in [out, *out["judges"]]:
            row["cost_live"] = money(row["cost_live"])
            row["cost_batch"] = money(row["cost_batch"])
        return out

    def cost_unknown_reason(self) -> str:
        """Return why the total cost is unknown ("" when it is known)."""
        unpriced = [j.judge for j in self.judges if j.cost_live is None]
        if len(unpriced) == 1:
            return f"judge {unpriced[0]} has no price"
        if unpriced:
            return f"judges {', '.join(unpriced)} have no price"
        return "; ".join(n for n in self.notes if "currenc" in n) if self.cost_live is None else ""


def _scale(benchmark_scale: Any) -> list:
    return list(benchmark_scale or [0, 1, 2])


def prompt_chars(
    key_entry: KeyEntry, response: Response | None, scale: list, version: str | None = None
) -> int:
    """Return the characters of the prompt a judge (response given) or an auditor (None) is
    sent for this pair, rendered as the backends render it: at template `version` (None:
    the role's default). FileNotFoundError for a version without a template."""
    return prompt_parts(key_entry, response, scale, version)[0]


def prompt_parts(
    key_entry: KeyEntry, response: Response | None, scale: list, version: str | None = None
) -> tuple[int, int]:
    """Return (the prompt's characters, its shared prefix's characters) for this pair, as
    prompt_chars renders it; the prefix is the JudgePrompt's (the text before the response,
    the same for every response to the key entry's question); 0 for an auditor prompt (one
    call an entry: nothing shared)."""
    from judges import render_auditor_prompt, render_judge_prompt

    if response is None:
        inp = audit_input(key_entry)
        text = render_auditor_prompt(inp, version) if version else render_auditor_prompt(inp)
        return len(text), 0
    inp = grading_input_for(key_entry, response, scale)
    prompt = render_judge_prompt(inp, version) if version else render_judge_prompt(inp)
    return len(prompt), len(prompt.prefix)


def cache_min_tokens(judge: Judge) -> int | None:
    """Return the fewest prompt tokens the judge's vendor caches: its backend_settings
    `cache_min_tokens` (a positive int), else judges.DEFAULT_CACHE_MIN_TOKENS
    (1,024: OpenAI's and Anthropic Sonnet/Opus's documented minimum; Anthropic Haiku's is
    2,048, set it per judge); None for the reference backend, which caches nothing.
    Raises JudgeConfigError naming the judge for a value that is not a positive int."""
    from judges import DEFAULT_CACHE_MIN_TOKENS, JudgeConfigError

    if judge.backend == "reference":
        return None
    value = (judge.backend_settings or {}).get("cache_min_tokens", DEFAULT_CACHE_MIN_TOKENS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JudgeConfigError(
            f"judge {judge.judge_id}: cache_min_tokens must be a positive integer, got {value!r}"
        )
    return value


def _usable_calls(judge: Judge, **filters: Any) -> Any:
    """Return the judge's answered calls with usage (filtered further by `filters`), newest
    first."""
    return JudgeCall.objects.filter(
        judge=judge,
        outcome=JudgeCall.Outcome.OK,
        input_tokens__isnull=False,
        output_tokens__isnull=False,
        **filters,
    ).order_by("-id")


def cached_share(
    judge: Judge, *, sample: int = CALIBRATION_CALLS
) -> tuple[float | None, float, str]:
    """Return (the cached share of input, 0-1; the cache-write share of input, 0-1; their
    basis in words) observed on the judge's `sample` newest answered calls with usage sent
    at its current prompt_version, or (None, 0, why there is none) when there is no such
    call: the shares depend on the prompt's layout (see the module docstring), so calls at
    another version do not count, and the estimate predicts the cache instead
    (predict_cached). A call that reports no cache writes (OpenAI) adds 0 writes. One query."""
    rows = list(
        _usable_calls(judge, prompt_version=judge.prompt_version).values_list(
            "input_tokens", "cached_tokens", "cache_write_tokens"
        )[:sample]
    )
    tokens_in = sum(i for i, _, _ in rows)
    if not tokens_in:
        return (
            None,
            0.0,
            (
                f"no call of {judge.judge_id} at prompt version {judge.prompt_version} reported "
                "usage yet"
            ),
        )
    share = sum(c or 0 for _, c, _ in rows) / tokens_in
    writes = sum(w or 0 for _, _, w in rows) / tokens_in
    return (
        share,
        writes,
        (
            f"cached: {share:.0%} of input"
            + (f", {writes:.0%} written to the cache at 1.25x the input price" if writes else "")
            + f", as observed on {len(rows)} call"
            f"{'s' if len(rows) != 1 else ''} at prompt version {judge.prompt_version}"
        ),
    )


def calibrate(judge: Judge, *, scale: list, sample: int = CALIBRATION_CALLS) -> Calibration:
    """Return the judge's token ratios from its `sample` newest answered calls whose usage is
    known (any run, any edition, any prompt version: each call's prompt rendered at the
    version it was sent with), else the defaults (4 chars a token, max_tokens out); the
    cached share from cached_share (calls at the judge's current prompt version only, else
    None and the basis leaves the cache to predict_cached). Four queries."""
    rows = list(
        _usable_calls(judge).values_list(
            "response_id",
            "key_entry_id",
            "input_tokens",
            "cached_tokens",
            "output_tokens",
            "prompt_version",
        )[:sample]
    )
    entries = _entries({r[1] for r in rows})
    responses = Response.objects.only("id", "text").in_bulk({r[0] for r in rows if r[0]})
    chars = tokens_in = out = n = 0
    memo: dict[tuple, int] = {}
    for response_id, entry_id, i, _, o, version in rows:
        entry, response = entries.get(entry_id), responses.get(response_id)
        if entry is None or (response_id is not None and response is None):
            continue
        key = (response_id, entry_id, version)
        if key not in memo:
            memo[key] = prompt_chars(entry, response, scale, template_of(version))
        chars, tokens_in, out, n = chars + memo[key], tokens_in + i, out + o, n + 1
    share, writes, cached_basis = cached_share(judge, sample=sample)
    if n and tokens_in:
        ratio, per_call = chars / tokens_in, out / n
        return Calibration(
            ratio,
            per_call,
            share,
            f"input: {ratio:.2f} characters a token and output: {per_call:.1f} tokens a call, "
            f"observed on {n} call{'s' if n != 1 else ''} of {judge.judge_id} with usage"
            + (f"; {cached_basis}" if share is not None else ""),
            writes,
        )
    max_tokens = judge_backend_config(judge).get("max_tokens") or _default_max_tokens()
    return Calibration(
        DEFAULT_CHARS_PER_TOKEN,
        float(max_tokens),
        share,
        f"input: {DEFAULT_CHARS_PER_TOKEN:g} characters a token (default: no call of "
        f"{judge.judge_id} reported usage yet); output: {max_tokens} tokens a call (its "
        f"max_tokens, an upper bound)" + (f"; {cached_basis}" if share is not None else ""),
        writes,
    )


def _default_max_tokens() -> int:
    from judges import JudgeConfig

    return JudgeConfig.__dataclass_fields__["max_tokens"].default


def _entries(ids: Iterable[int]) -> dict[int, KeyEntry]:
    return KeyEntry.objects.select_related("question", "citation_document").in_bulk(list(ids))


class CachePrediction(NamedTuple):
    """What predict_cached expects a judge's vendor to cache: cached (input tokens read
    from the cache), writes (input tokens written to it, billed at 1.25x: Anthropic only,
    OpenAI's writes are free and unreported), basis (in words)."""

    cached: int
    writes: int
    basis: str


def predict_cached(
    judge: Judge, groups: dict[Any, Sequence[int]], chars_per_token: float
) -> CachePrediction:
    """Return the cache a run's calls of `judge` should hit, predicted from the prompts'
    layout and the calls the run keeps in flight, for a judge with no call at its prompt
    version to observe it on.

    groups: {key entry pk: (pairs of this judge on it, its prompts' shared prefix in
    characters)}. A run sends a question's pairs one after another (question-major,
    scoring.runs.services.pairs), `w` of the judge's calls in flight at once
    (tunables.judge_window over its pairs in the run: its `concurrency`, 8 unset). A vendor
    makes a prefix readable from its cache only once the first request carrying it has
    been answered (Anthropic's prompt-caching guide advises waiting for the first response
    before sending requests meant to hit the cache; issue 30 item 12 measured 7.8 % more
    cost than a prediction without it, 8 calls in flight), so the first min(n, w) calls of a group of n go out
    before any of them is answered and all miss; the later ones read the prefix. Provided
    the prefix reaches the vendor's minimum (cache_min_tokens): cached = sum of
    (n - min(n, w)) x prefix tokens over the groups whose prefix tokens (prefix characters
    / chars_per_token) >= the minimum, else 0; writes (an anthropic judge: each missing
    call writes the marked prefix) = sum of min(n, w) x prefix tokens over those groups.
    The reference backend caches nothing. Raises JudgeConfigError for a bad
    cache_min_tokens.
    """
    minimum = cache_min_tokens(judge)
    why = f"no call of {judge.judge_id} at prompt version {judge.prompt_version} reported usage"
    if minimum is None:
        return CachePrediction(0, 0, f"cached: none (the reference backend caches nothing; {why})")
    window = judge_window(judge, sum(n for n, _ in groups.values()))
    cached = writes = 0.0
    reached = 0
    for n, prefix_chars in groups.values():
        prefix_tokens = prefix_chars / chars_per_token
        if prefix_chars and prefix_tokens >= minimum:
            reached += 1
            cached += (n - min(n, window)) * prefix_tokens
            writes += min(n, window) * prefix_tokens
    if judge.backend != "anthropic":
        writes = 0.0
    wrote = f", {round(writes):,} written at 1.25x the input price" if writes else ""
    return CachePrediction(
        round(cached),
        round(writes),
        f"cached: {round(cached):,} tokens predicted from the prompts' layout ({reached} of "
        f"{len(groups)} questions have a shared prefix of at least the cache minimum, "
        f"{minimum:,} tokens; with {window} call{'s' if window != 1 else ''} in flight the "
        f"first {window} of a question miss and the others read it{wrote}; {why} yet)",
    )


def estimate_pairs(
    pairs: Sequence[tuple[Judge, KeyEntry, Response | None]],
    *,
    scale: list,
    calibrations: dict[int, Calibration] | None = None,
) -> list[JudgeEstimate]:
    """Return one JudgeEstimate per judge of `pairs` ((judge, key entry, response or None for
    an audit), the rows a chunk or a run holds), sorted by judge id.

    tokens_in = ceil(sum of the rendered prompts' characters / chars_per_token);
    tokens_cached = round(tokens_in x cached_share) and cache writes = round(tokens_in x
    write_share) when the shares were observed at the judge's prompt version, else both
    predicted from the prompts' shared prefixes and the calls in flight (predict_cached);
    cache writes are priced by tokens_cost (1.25x the input price) and not listed apart;
    tokens_out = ceil(pairs x out_per_call).
    Each prompt is rendered at its judge's prompt_version (template_of); one shared by
    several judges at the same version is rendered once. `calibrations` ({judge pk:
    Calibration}) is filled with the ones computed (calibrate) and reused when given.
    """
    calibrations = {} if calibrations is None else calibrations
    chars: dict[int, int] = {}
    count: dict[int, int] = {}
    judges: dict[int, Judge] = {}
    memo: dict[tuple, tuple[int, int]] = {}
    # {judge pk: {key entry pk: [pairs, prefix characters]}}: the groups sharing a prefix.
    groups: dict[int, dict[Any, list[int]]] = {}
    for judge, entry, response in pairs:
        version = template_of(judge.prompt_version)
        key = (entry.pk, response.pk if response is not None else None, version)
        if key not in memo:
            memo[key] = prompt_parts(entry, response, scale, version)
        judges[judge.pk] = judge
        chars[judge.pk] = chars.get(judge.pk, 0) + memo[key][0]
        count[judge.pk] = count.get(judge.pk, 0) + 1
        group = groups.setdefault(judge.pk, {}).setdefault(entry.pk, [0, memo[key][1]])
        group[0] += 1
    out = []
    for pk in sorted(judges, key=lambda pk: judges[pk].judge_id):
        judge = judges[pk]
        if pk not in calibrations:
            calibrations[pk] = calibrate(judge, scale=scale)
        cal = calibrations[pk]
        tokens_in = math.ceil(chars[pk] / cal.chars_per_token)
        basis = cal.basis
        if cal.cached_share is None:
            predicted = predict_cached(judge, groups[pk], cal.chars_per_token)
            cached, writes = predicted.cached, predicted.writes
            basis = f"{basis}; {predicted.basis}"
        else:
            cached = round(tokens_in * cal.cached_share)
            writes = round(tokens_in * cal.write_share)
        cached = min(tokens_in, cached)
        tokens = {
            "input_tokens": tokens_in,
            "cached_tokens": cached,
            "output_tokens": math.ceil(count[pk] * cal.out_per_call),
            "cache_write_tokens": min(writes, tokens_in - cached),
        }
        out.append(
            JudgeEstimate(
                judge=judge.judge_id,
                pairs=count[pk],
                calls=count[pk],
                tokens_in=tokens["input_tokens"],
                tokens_cached=tokens["cached_tokens"],
                tokens_out=tokens["output_tokens"],
                cost_live=tokens_cost(Prices.of(judge, "live"), **tokens),
                cost_batch=tokens_cost(Prices.of(judge, "batch"), **tokens),
                currency=judge.price_currency,
                basis=basis,
            )
        )
    return out


def combine(judges: list[JudgeEstimate], notes: Sequence[str] = ()) -> RunEstimate:
    """Return the RunEstimate totalling `judges`; a total cost is None when a judge's is
    unknown or the priced judges' currencies differ (a note says which)."""
    notes = list(notes)
    totals: dict[str, Decimal | None] = {}
    for mode in ("live", "batch"):
        costs = [getattr(j, f"cost_{mode}") for j in judges]
        missing = [j.judge for j, c in zip(judges, costs, strict=True) if c is None]
        if missing:
            notes.append(f"cost unknown ({mode}): judge {', '.join(missing)} has no {mode} price")
        totals[mode] = None if missing else sum(costs, Decimal(0))
    currencies = {j.currency for j in judges if j.cost_live is not None}
    if len(currencies) > 1:
        notes.append(
            f"the judges' prices are in different currencies ({', '.join(sorted(currencies))}): "
            "no total cost"
        )
        totals = {"live": None, "batch": None}
    return RunEstimate(
        needed=sum(j.pairs for j in judges),
        calls=sum(j.calls for j in judges),
        tokens_in=sum(j.tokens_in for j in judges),
        tokens_cached=sum(j.tokens_cached for j in judges),
        tokens_out=sum(j.tokens_out for j in judges),
        cost_live=totals["live"],
        cost_batch=totals["batch"],
        judges=judges,
        notes=notes,
        currency=next(iter(currencies)) if len(currencies) == 1 else "",
    )


def estimate_run(
    *,
    edition: KeyEdition,
    judges: Sequence[Judge],
    kind: str = ScoringRun.Kind.GRADE,
    candidates: Sequence[KeyEntry] = (),
    calibrations: dict[int, Calibration] | None = None,
) -> RunEstimate:
    """Return what a run of `kind` over `edition` with `judges` would send and cost, without
    creating a run or calling a judge: the one estimate of grading work (the Runs page, the
    draft's impact page and each correction on the approvals page; issue 30 item 6).

    The pairs are the run's own (rescore_needed_pairs / audit_needed_pairs, after
    graders_for: judges that cannot grade are left out with a note), so the re-asks of
    stored unparsed replies a run makes are counted; each needed pair's prompt is rendered
    and measured (estimate_pairs). `candidates` are key entries not saved yet (a pending
    correction's answer and citation, review.impact.candidate_entry): each replaces its
    question's entry, every response to that question needing a grade from every judge, as
    the run after approving it would grade. `calibrations` ({judge pk: Calibration}) lets a
    page estimating several runs calibrate each judge once. Reads only: the selectors'
    queries, the needed responses and entries (two queries, one more per candidate), and
    four per judge to calibrate.
    """
    role = Judge.Role.AUDITOR if kind == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
    usable, notes = graders_for(judges, role=role)
    if not usable:
        notes = [NO_GRADER_NOTE, *notes]
    if kind == ScoringRun.Kind.AUDIT:
        needed = audit_needed_pairs(edition=edition, auditors=usable)
    else:
        needed = rescore_needed_pairs(edition=edition, judges=usable)
    by_pk = {j.pk: j for j in usable}
    entries = _entries({e for _, _, e in needed})
    replaced = {c.question_id for c in candidates}
    needed = [p for p in needed if entries[p[2]].question_id not in replaced]
    responses = Response.objects.only("id", "text").in_bulk({r for r, _, _ in needed if r})
    rows = [(by_pk[j], entries[e], responses[r] if r is not None else None) for r, j, e in needed]
    for candidate in candidates:
        answers = list(
            Response.objects.filter(question_id=candidate.question_id).only("id", "text")
        )
        rows += [(judge, candidate, response) for judge in usable for response in answers]
    scale = _scale(edition.benchmark.grade_scale)
    judged = estimate_pairs(rows, scale=scale, calibrations=calibrations)
    return combine(judged, [*notes, RETRIES_NOTE])


def estimate_summary(estimate: RunEstimate) -> str:
    """Return the estimate in one British-English sentence for the pages: "about N calls,
    ~T tokens, cost X live / Y batch", "... cost unknown: judge J has no price", "nothing
    to grade: ..." or, when no judge can grade, "no judge can grade (why each was
    skipped): ..."."""
    tokens = estimate.tokens_in + estimate.tokens_out
    text = f"about {estimate.calls:,} call{'s' if estimate.calls != 1 else ''}, ~{tokens:,} tokens"
    if not estimate.calls:
        if NO_GRADER_NOTE in estimate.notes:
            skipped = "; ".join(n for n in estimate.notes if ": skipped, " in n)
            return f"no judge can grade ({skipped or 'none is set up'}): no call, no cost"
        return "nothing to grade: no call, no cost"
    if estimate.cost_live is None:
        return f"{text}, cost unknown: {estimate.cost_unknown_reason()}"
    batch = (
        "unknown batch"
        if estimate.cost_batch is None
        else f"{_shown(estimate.cost_batch)} {estimate.currency} batch"
    )
    return f"{text}, cost {_shown(estimate.cost_live)} {estimate.currency} live / {batch}"


def _shown(value: Decimal) -> str:
    """Return money rounded for a sentence: 2 decimal places, 4 below 1 (a small re-score)."""
    return f"{value:.4f}" if value < 1 else f"{value:,.2f}"
