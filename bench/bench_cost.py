"""Benchmark what a re-score costs (issue 20): tokens, cached tokens and money, measured on
the ledger of real runs against the loopback judge API.

Usage (from the project root; needs PostgreSQL)::

    .venv/bin/python bench/bench_cost.py                    # full scale: 1,001 questions x 18 models
    .venv/bin/python bench/bench_cost.py --questions 100    # a subset (said so in the output)
    .venv/bin/python bench/bench_cost.py --only cache --no-write   # one section, print only

Set-up (not timed): drop/create the database `--db` (default snaglist_cost), migrate,
write the seeded bundle of tests/bundle_factory.py (`--questions` of its 1,001, 18 models,
2 judges) and import it, start tests/judge_server.py in this process (it reports usage
as each vendor does and emulates their prompt caches; PrefixCache), point the bundle's
judges at it - j-openai through the openai backend, j-anthropic through the anthropic
backend - with the server's lowered cache minimum (RUN_MIN_TOKENS) as their
cache_min_tokens, and give them a price set (PRICES: illustrative per-million list prices, set by
this script; the product has none built in).

Runs are started with `scoring.run_start` executed eagerly in this process
(CELERY_TASK_ALWAYS_EAGER: the same chunk path a worker takes, without a broker), so a
run is one process's work; the throughput of the worker is bench_judge_throughput.py's.

Sections: SECTIONS maps a name to a function(Context) -> Markdown lines; they run in that
order and their lines form the "## Cost" section of bench/README.md, each under a "### "
heading; a run of some sections (`--only`) replaces those subsections and keeps the others
(merge). Each run re-scores every pair at a prompt version (set_version forgets the bench's
grades at it):
- estimate: scoring.runs.estimate.estimate_run before any call, then a judge-v1 run; the
  judge-v2 re-score estimated (calibrated on the judge-v1 calls), then run; each estimate
  against the following run's ledger (scoring.runs.costs.calls_cost).
- batch: the judge-v2 re-score again in batch mode (run_start, then scoring.poll_batches
  applied until settled) against the live one; its estimate calibrated on judge-v2 calls.
- cache: judge-v1 against judge-v2, the share of input read from the prompt cache.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTION = "## Cost"
KEY_ENV = "SNAGLIST_JUDGE_KEY_BENCH"
# Illustrative live prices per million tokens (USD), of the kind an admin copies from the
# vendors' price pages: an OpenAI-like judge and an Anthropic-like one.
PRICES = {
    "j-openai": {
        "price_input": Decimal("2.50"),
        "price_cached_input": Decimal("1.25"),
        "price_output": Decimal("10.00"),
    },
    "j-anthropic": {
        "price_input": Decimal("3.00"),
        "price_cached_input": Decimal("0.30"),
        "price_output": Decimal("15.00"),
    },
}
# Batch prices: half the live ones, as both vendors sell their batch APIs (OpenAI Batch API,
# Anthropic Message Batches: "50% discount").
BATCH_DISCOUNT = Decimal("0.5")
BACKENDS = {"j-openai": "openai", "j-anthropic": "anthropic"}
# The server's cache minimum during the runs (so the ledger holds cached tokens to check)
# and the minimums the same requests are replayed at; 1,024 is both vendors' minimum.
RUN_MIN_TOKENS = 256
REPLAY_MIN_TOKENS = (1024, 512, 128)


@dataclass
class Context:
    """What the sections share: the parsed arguments, the imported benchmark's edition and
    judges, the loopback server, and notes for the section's head."""

    args: argparse.Namespace
    edition: Any
    judges: list[Any]
    server: Any
    notes: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)


def prepare_database(url: str, name: str) -> None:
    """Drop and create database `name`, then migrate it."""
    psql = ["-h", "127.0.0.1", "-U", "postgres"]
    subprocess.run(["dropdb", *psql, "--if-exists", "--force", name], check=True)
    subprocess.run(["createdb", *psql, name], check=True)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        check=True,
    )


def set_up(args: argparse.Namespace) -> Context:
    """Import the seeded bundle and point its judges at a started loopback server."""
    import django

    django.setup()
    from interchange.bundles import import_bundle
    from questions.models import KeyEdition
    from scoring.models import Judge
    from tests.bundle_factory import write_bundle
    from tests.judge_server import JudgeServer

    with tempfile.TemporaryDirectory() as folder:
        write_bundle(folder, n_questions=args.questions, seed=0)
        import_bundle(folder)
    edition = KeyEdition.objects.filter(status="published").order_by("-pk").first()
    server = JudgeServer(latency=args.latency).start()
    judges = list(Judge.objects.filter(benchmark_id=edition.benchmark_id, role="judge"))
    for judge in judges:
        sdk = BACKENDS[judge.judge_id]
        judge.backend, judge.model, judge.api_key_env = sdk, f"loopback-{sdk}", KEY_ENV
        judge.base_url = server.url + "/v1" if sdk == "openai" else server.url
        # The runs' cache minimum is the emulated vendor's, and an admin sets a judge's
        # cache_min_tokens to its vendor's minimum: the estimate predicts the cache from it.
        judge.backend_settings = {
            "max_retries": 2,
            "timeout": 30,
            "cache_min_tokens": RUN_MIN_TOKENS,
        }
        judge.price_currency = "USD"
        for name, value in PRICES[judge.judge_id].items():
            setattr(judge, name, value)
            setattr(judge, f"batch_{name}", value * BATCH_DISCOUNT)
        judge.save()
    return Context(args=args, edition=edition, judges=judges, server=server)


class TeeCache:
    """Stands in for the server's PrefixCache: answers with one at RUN_MIN_TOKENS and
    replays every request through one per REPLAY_MIN_TOKENS, tallying per minimum and
    vendor the prompt tokens billed and the tokens read from / written to the cache. Each
    cache has the vendors' timing (PrefixCache's default "reply"): a request's prefixes
    become readable in every cache when the server writes its reply (remember)."""

    def __init__(self) -> None:
        from tests.judge_server import PrefixCache

        self.caches = {n: PrefixCache(min_tokens=n) for n in (RUN_MIN_TOKENS, *REPLAY_MIN_TOKENS)}
        self.min_tokens, self.ready = RUN_MIN_TOKENS, "reply"
        self.tally: dict[tuple[int, str], list[int]] = {}
        self._pending: dict[int, list[tuple[Any, Any]]] = {}

    def lookup(self, flavour: str, request: dict[str, Any]) -> Any:
        from tests.judge_server import prompt_tokens

        billed = prompt_tokens(request)
        found_all = []
        for n, cache in self.caches.items():
            found = cache.lookup(flavour, request)
            found_all.append((cache, found))
            row = self.tally.setdefault((n, flavour), [0, 0, 0])
            row[0] += billed
            row[1] += found.read
            row[2] += found.write
            if n == RUN_MIN_TOKENS:
                answer = found
        self._pending[id(answer)] = found_all
        return answer

    def remember(self, found: Any) -> None:
        """Make the request's prefixes readable in every cache (its reply is written)."""
        for cache, each in self._pending.pop(id(found), []):
            cache.remember(each)


def set_version(ctx: Context, version: str) -> list[Any]:
    """Set every judge's prompt_version to `version` and forget the bench's grades at it, so
    every pair is needed again (a re-score at that version); return the judges reloaded."""
    from scoring.models import Grade, Judge

    pks = [j.pk for j in ctx.judges]
    Judge.objects.filter(pk__in=pks).update(prompt_version=version)
    Grade.objects.filter(judge_id__in=pks, prompt_version=version).delete()
    return list(Judge.objects.filter(pk__in=pks).order_by("judge_id"))


def grade_run(ctx: Context, version: str, mode: str = "live") -> dict[str, Any]:
    """Run a grading run of every pair at `version` (set_version) eagerly through the
    loopback server, in `mode` ("live", or "batch": run_start submits the batches, then
    `scoring.poll_batches` is applied until the run is settled); return its figures.

    Timings: wall, and CPU of this process's main thread (time.thread_time: the loopback
    server's thread is left out), for the submit (run_start) and settle (the polls) phases;
    a live run is all "submit"."""
    from scoring.models import JudgeCall
    from scoring.runs import services
    from scoring.runs.costs import calls_cost
    from scoring.runs.tasks import poll_batches, run_start

    judges = set_version(ctx, version)
    tee = TeeCache()
    ctx.server.prefix_cache = tee
    ctx.server.reset()
    run = services.scoring_run_create(edition=ctx.edition, judges=judges, enqueue=False, mode=mode)
    wall, cpu = time.perf_counter(), time.thread_time()
    run_start.apply(args=(run.pk,))
    submit = (time.perf_counter() - wall, time.thread_time() - cpu)
    wall, cpu, polls = time.perf_counter(), time.thread_time(), 0
    while mode == "batch" and polls < 20:
        run.refresh_from_db()
        if run.status not in services.ACTIVE_STATUSES:
            break
        poll_batches.apply()
        polls += 1
    settle = (time.perf_counter() - wall, time.thread_time() - cpu)
    run.refresh_from_db()
    assert run.status == "complete" and run.failed == 0, (run.status, run.failed, run.error)
    ctx.server.requests.clear()
    print(
        f"{version} {mode} run: {run.needed} pairs, {submit[0] + settle[0]:.0f} s", file=sys.stderr
    )
    calls = JudgeCall.objects.filter(run=run)
    return {
        "version": version,
        "mode": mode,
        "run": run,
        "wall_s": submit[0] + settle[0],
        "submit": submit,
        "settle": settle,
        "polls": polls,
        "cost": calls_cost(calls),
        "cost_live": calls_cost(calls, mode="live"),
        "modes": sorted(set(calls.values_list("mode", flat=True))),
        "tally": tee.tally,
        "prefix_tokens": prefix_tokens(ctx, version),
    }


def prefix_tokens(ctx: Context, version: str) -> list[int]:
    """Return the loopback token count of each question's shared prompt prefix at `version`."""
    from judges import GradingInput, render_judge_prompt
    from scoring.runs.services.backends import citation_text
    from tests.judge_server import count_tokens

    entries = ctx.edition.entries.select_related("question", "citation_document")
    return [
        count_tokens(
            render_judge_prompt(
                GradingInput(e.question.text, e.answer, citation_text(e), "x"), version
            ).prefix
        )
        for e in entries
    ]


def replay_cost(ctx: Context, result: dict[str, Any], n: int) -> Decimal:
    """Return the run's cost had the caches held prefixes from `n` tokens on: the replayed
    input, cache reads and writes, the ledger's output tokens, priced by scoring.runs.costs."""
    from scoring.runs.costs import Prices, tokens_cost

    total = Decimal(0)
    for judge in ctx.judges:
        billed, read, write = result["tally"][(n, BACKENDS[judge.judge_id])]
        row = next(r for r in result["cost"]["judges"] if r["judge"] == judge.judge_id)
        cost = tokens_cost(
            Prices.of(judge),
            input_tokens=billed,
            cached_tokens=read,
            cache_write_tokens=write,
            output_tokens=row["output_tokens"],
        )
        total += cost
    return total


def section_cache(ctx: Context) -> list[str]:
    """The prompt cache: cached share of input tokens and cost, judge-v1 against judge-v2."""
    results = [grade_run(ctx, v) for v in ("judge-v1", "judge-v2")]
    lines = [
        "### Prompt caching: judge-v1 against judge-v2 (issue 20 item 7)",
        "",
        "Each layout re-scores every pair (both judges' prompt_version set to it). The server",
        f"answered with its caches holding prefixes from {RUN_MIN_TOKENS} tokens on; every request",
        "was also replayed through caches with other minimums (1,024 is both vendors'",
        "minimum). Cached share = cache reads / input tokens; cost at the prices above.",
        "",
        "| layout | calls | input tokens | shared prefix (min / median / max tokens) "
        "| min tokens | cached share (OpenAI / Anthropic / both) | cache writes | cost |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        p = r["prefix_tokens"]
        spread = f"{min(p)} / {statistics.median(p):.0f} / {max(p)}"
        for n in (*REPLAY_MIN_TOKENS[:1], RUN_MIN_TOKENS, *REPLAY_MIN_TOKENS[1:]):
            if n == RUN_MIN_TOKENS:
                ledger = r["cost"]
                billed, read, write = (
                    ledger["input_tokens"],
                    ledger["cached_tokens"],
                    ledger["cache_write_tokens"],
                )
                cost = f"**{ledger['cost']} USD** (ledger)"
                check = sum(r["tally"][(n, f)][0] for f in ("openai", "anthropic"))
                assert check == billed, "the ledger's input tokens differ from the server's"
            else:
                billed, read, write = (
                    sum(r["tally"][(n, f)][i] for f in ("openai", "anthropic")) for i in range(3)
                )
                cost = f"{replay_cost(ctx, r, n).quantize(Decimal('0.000001'))} USD"
            share = [r["tally"][(n, f)][1] / r["tally"][(n, f)][0] for f in ("openai", "anthropic")]
            lines.append(
                f"| {r['version']} | {r['cost']['calls']:,} | {billed:,} | {spread} | {n:,} "
                f"| {100 * share[0]:.1f}% / {100 * share[1]:.1f}% / {100 * read / billed:.1f}% "
                f"| {write:,} | {cost} |"
            )
    v1, v2 = results
    short = 1024 - statistics.median(v2["prefix_tokens"])
    questions = v2["run"].needed // (len(ctx.judges) * 18)
    lines += [
        "",
        f"- Pairs per run: {v2['run'].needed:,} = {questions} scored questions (of the bundle's"
        f" {ctx.args.questions}; the others are excluded by its audit verdicts) x 18 responses x"
        f" {len(ctx.judges)} judges. Runs (eager, one process, loopback latency 0): judge-v1"
        f" {v1['wall_s']:.0f} s, judge-v2 {v2['wall_s']:.0f} s; every pair graded, none failed.",
        "- Each layout's row at the run's minimum is the product's own figure (the runs' JudgeCall",
        "  usage priced by scoring.runs.costs.calls_cost), checked against the server's count of the",
        "  input tokens it billed; the other rows price the replayed counts by the same formula.",
        "- At the vendors' 1,024-token minimum nothing is cached with either layout: judge-v2's",
        f"  shared prefix (its instructions, scale, question, key and citation) is a median"
        f" {statistics.median(v2['prefix_tokens']):.0f}",
        f"  tokens, {short:.0f} short. judge-v1's is the question, key and citation only (median"
        f" {statistics.median(v1['prefix_tokens']):.0f}), its",
        "  instructions coming after the response. Once the shared part passes the minimum",
        "  (a longer prompt, or a vendor with a lower one) judge-v2 has"
        f" {100 * v2['cost']['cached_tokens'] / v2['cost']['input_tokens']:.0f}% of its input",
        f"  read from the cache (at {RUN_MIN_TOKENS}), judge-v1 nothing until the minimum is"
        f" under its ~{statistics.median(v1['prefix_tokens']):.0f}-token prefix.",
        "- The emulation makes a prefix readable once the reply of a request carrying it is",
        '  written, as the vendors do (`PrefixCache` ready "reply", issue 30 item 12): a',
        "  question's calls sent together (a judge's window of `concurrency` calls in flight,",
        "  8 unset) miss together, and each Anthropic one writes the prefix.",
    ]
    return lines


def scale_text(ctx: Context) -> str:
    """Return the size this invocation runs at, in words, for a subsection's first line."""
    n = ctx.args.questions
    if n >= 1001:
        return "Full scale (1,001 questions x 18 models x 2 judges)."
    return f"A subset: {n} of the 1,001 questions x 18 models x 2 judges (`--questions {n}`)."


def estimate_now(ctx: Context, version: str) -> Any:
    """Return scoring.runs.estimate.estimate_run for a re-score of the edition by the bench's
    judges at `version` (set_version first: every pair needed), as an admin would see it."""
    from scoring.runs.estimate import estimate_run

    return estimate_run(edition=ctx.edition, judges=set_version(ctx, version))


def pct(estimate: float, actual: float) -> str:
    """Return the estimate's error against the actual in % ("n/a" when the actual is 0)."""
    return f"{100 * (estimate - actual) / actual:+.1f}%" if actual else "n/a"


def compare_rows(label: str, est: Any, actual: dict[str, Any], mode: str = "live") -> list[str]:
    """Return Markdown table rows: tokens (input, cached, output) and cost of estimate `est`
    (a RunEstimate, its `mode` cost) against the run's ledger figures (calls_cost)."""
    cost_est = est.cost_live if mode == "live" else est.cost_batch
    pairs = [
        ("input tokens", est.tokens_in, actual["input_tokens"]),
        ("cached tokens", est.tokens_cached, actual["cached_tokens"]),
        ("output tokens", est.tokens_out, actual["output_tokens"]),
        (f"cost ({mode}, USD)", float(cost_est), float(Decimal(actual["cost"]))),
    ]
    rows = []
    for what, e, a in pairs:
        shown = (f"{e:,.2f}", f"{a:,.2f}") if "cost" in what else (f"{e:,}", f"{a:,}")
        rows.append(f"| {label} | {what} | {shown[0]} | {shown[1]} | {pct(e, a)} |")
    return rows


def section_estimate(ctx: Context) -> list[str]:
    """The estimate against the run's actual: (a) before any call (defaults), (b) a judge-v2
    re-score estimated after a judge-v1 run exists (calibrated), (c) the same re-score
    estimated after a judge-v2 run exists (compared with the batch section's run when it ran,
    else a second live run)."""
    from scoring.models import JudgeCall

    fresh = not JudgeCall.objects.exists()
    before = estimate_now(ctx, "judge-v1")
    first = grade_run(ctx, "judge-v1")
    calibrated = estimate_now(ctx, "judge-v2")
    second = grade_run(ctx, "judge-v2")
    again = estimate_now(ctx, "judge-v2")
    ctx.results.update({"live-v2": second, "estimate-v2-again": again})
    lines = [
        "### The estimate against the actual (issue 20 item 3)",
        "",
        scale_text(ctx),
        "`scoring.runs.estimate.estimate_run` for a re-score of every pair, against the ledger of",
        "the run that followed (`scoring.runs.costs.calls_cost`: input tokens include the cached",
        "ones; cost at the live prices above). Error = (estimate - actual) / actual.",
        "",
        "| estimate | figure | estimate | actual | error |",
        "|---|---|---:|---:|---:|",
        *compare_rows(
            "(a) judge-v1 run, before any call" + ("" if fresh else " (calls existed!)"),
            before,
            first["cost"],
        ),
        *compare_rows("(b) judge-v2 re-score, after the judge-v1 run", calibrated, second["cost"]),
        "",
        f"- Basis of (a): {'; '.join(f'{j.judge}: {j.basis}' for j in before.judges)}.",
        f"- Basis of (b): {'; '.join(f'{j.judge}: {j.basis}' for j in calibrated.judges)}.",
        f"- Calls: estimated {before.calls:,} / {calibrated.calls:,}, made"
        f" {first['cost']['calls']:,} / {second['cost']['calls']:,} (runs: judge-v1"
        f" {first['wall_s']:.0f} s, judge-v2 {second['wall_s']:.0f} s, eager in one process).",
        "- (a) is the estimate with nothing to calibrate from: input tokens at 4 characters a",
        "  token (the loopback tokenizer gives ~3.5 on these prompts: instructions, JSON and",
        "  citations are denser than prose; a vendor's tokenizer differs again), output at",
        "  each judge's max_tokens (1,024), an upper bound the short JSON verdicts (33 tokens)",
        "  come nowhere near: a ceiling, not an estimate, as the basis says.",
        "- (b) is calibrated on the judge-v1 run (input and output tokens). No judge-v2 call",
        "  exists yet, so the new layout's cached share cannot be observed",
        "  (`scoring.runs.estimate.cached_share` counts calls at the judge's current prompt version",
        "  only) and is predicted from the layout (`scoring.runs.estimate.predict_cached`): the",
        "  first w calls of a question (w: the judge's calls in flight, 8) go out before any",
        "  is answered and miss; the others read the question's shared prefix (the judge-v2",
        "  text before the response; its characters / the calibrated characters a token) from",
        "  the cache when the prefix reaches the judge's `cache_min_tokens` (here the runs'",
        f"  {RUN_MIN_TOKENS}, as an admin sets the vendor's minimum); each Anthropic miss",
        "  writes it at 1.25x the input price. The prediction runs a little high:",
        "  OpenAI's cache (and the loopback's) reads in 128-token steps past the minimum, so",
        "  the last part of a prefix is not read. At the vendors' 1,024 minimum the judge-v2",
        "  prefixes (~535 tokens) are too short and nothing is predicted, as the cache",
        "  section's replay measures. Before the prediction none was assumed: at full scale",
        "  (b)'s cached tokens were -100% and its cost +88.4%.",
    ]
    return lines


def section_batch(ctx: Context) -> list[str]:
    """The same judge-v2 re-score in batch mode against live: cost from the ledger (each
    call at its send mode's prices), cached share, and batch mode's own overhead per call."""
    live = ctx.results.get("live-v2") or grade_run(ctx, "judge-v2")
    again = ctx.results.get("estimate-v2-again") or estimate_now(ctx, "judge-v2")
    batch = grade_run(ctx, "judge-v2", mode="batch")
    ratio = Decimal(batch["cost"]["cost"]) / Decimal(live["cost"]["cost"])
    n = batch["cost"]["calls"]
    lines = [
        "### Batch mode against live: the judge-v2 re-score (issue 20 item 6)",
        "",
        scale_text(ctx),
        "The same re-score (every pair at judge-v2) sent live, then through the vendors' batch",
        'APIs (`scoring_run_create(mode="batch")`, then `scoring.poll_batches` applied until',
        "the run settled; the loopback batches end at once). Cost from each run's ledger, each",
        "call at its send mode's prices (batch prices = half the live ones).",
        "",
        "| mode | calls sent as | calls | input tokens | cached (share) | cache writes "
        "| output tokens | cost (ledger) | the same calls at live prices |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in (live, batch):
        c = r["cost"]
        lines.append(
            f"| {r['mode']} | {', '.join(r['modes'])} | {c['calls']:,} | {c['input_tokens']:,} "
            f"| {c['cached_tokens']:,} ({100 * c['cached_tokens'] / c['input_tokens']:.1f}%) "
            f"| {c['cache_write_tokens']:,} | {c['output_tokens']:,} | **{c['cost']} USD** "
            f"| {r['cost_live']['cost']} USD |"
        )
    (sw, sc), (tw, tc) = batch["submit"], batch["settle"]
    lines += [
        "",
        f"- Batch / live cost: **{ratio:.3f}** (goal 0.5); cached share the same in both"
        " (the loopback batches read and fill the same prefix cache, in the run's",
        "  question-major order).",
        "- The estimate of this batch re-score, made once the judge-v2 live run existed",
        "  (calibrated on calls at judge-v2, so the cached share is observed), against its ledger:",
        "",
        "| estimate | figure | estimate | actual | error |",
        "|---|---|---:|---:|---:|",
        *compare_rows("(c) judge-v2 re-score, after a judge-v2 run", again, batch["cost"], "batch"),
        "",
        f"- Batch mode's own work ({n:,} calls; wall and CPU of the process's main thread, the",
        "  loopback server's thread left out; its batches end at once, so no vendor turnaround):",
        f"  submit (`scoring.run_start`: claim, record, render, build, upload) {sw:.1f} s wall"
        f" ({1000 * sw / n:.2f} ms/call), {sc:.1f} s CPU ({1000 * sc / n:.2f} ms/call); settle"
        f" ({batch['polls']} application(s) of `scoring.poll_batches`: retrieve, download, parse,"
        f" settle, close the run) {tw:.1f} s wall ({1000 * tw / n:.2f} ms/call), {tc:.1f} s CPU"
        f" ({1000 * tc / n:.2f} ms/call). The live run of the same pairs took"
        f" {live['wall_s']:.0f} s wall in the same process.",
        "- In reality a batch's wall time is the vendor's turnaround (minutes, up to 24 h),",
        "  which dwarfs the product's share above.",
    ]
    return lines


SECTIONS: dict[str, Callable[[Context], list[str]]] = {
    "estimate": section_estimate,
    "batch": section_batch,
    "cache": section_cache,
}


def render(ctx: Context, parts: list[list[str]]) -> str:
    """Return the "## Cost" section: the set-up, then each section's lines."""
    head = [
        SECTION,
        "",
        "`bench/bench_cost.py [--questions N]` (issue 20) on the generated benchmark (full"
        " scale: 1,001 questions x 18 models x 2 judges; each subsection says the size it was"
        " run at), graded through the official SDKs",
        "against `tests/judge_server.py`, which reports usage as each vendor does and emulates",
        "their prompt caches (OpenAI: the longest prefix seen before, in 128-token steps from",
        "the minimum; Anthropic: the blocks up to the one marked cache_control, written on first",
        "sight at 1.25x the input price, read after at the cached price). Prices (USD per",
        "million input / cached input / output): "
        + "; ".join(
            f"{j} {p['price_input']} / {p['price_cached_input']} / {p['price_output']}"
            for j, p in PRICES.items()
        )
        + f" (illustrative, set by the script); batch prices {BATCH_DISCOUNT}x those.",
        *(f"- {n}" for n in ctx.notes),
        "",
    ]
    body = [line for part in parts for line in [*part, ""]]
    return "\n".join(head + body).rstrip("\n") + "\n"


def subsections(text: str) -> tuple[str, list[str]]:
    """Split a "## Cost" section into its head and its "### " subsections (each a string
    beginning with its heading line)."""
    parts = re.split(r"^(?=### )", text, flags=re.M)
    return parts[0], [p.rstrip("\n") + "\n" for p in parts[1:]]


def merge(current: str, text: str) -> str:
    """Return section `text` with the subsections of `current` (the README's "## Cost"
    section) that `text` has none of appended, by heading up to its first "(": sections not
    run this time keep their figures. Order: SECTIONS' headings as they appear."""
    head, new = subsections(text)
    _, old = subsections(current)
    titles = {part.split("(")[0] for part in new}
    kept = [part for part in old if part.split("(")[0] not in titles]
    return head + "\n".join(new + kept)


def write_section(text: str) -> None:
    """Replace (or append) the "## Cost" section of bench/README.md only, keeping the
    subsections of sections not run this time (merge)."""
    path = ROOT / "bench" / "README.md"
    current = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    found = pattern.search(current)
    if found:
        text = merge(found.group(0), text)
        updated = current[: found.start()] + text + "\n" + current[found.end() :]
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    path.write_text(updated, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=1001, help="of the 1,001 (default all)")
    parser.add_argument("--db", default="snaglist_cost", help="database to drop and create")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append", help="sections")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds the loopback judge takes per reply (0: at once; a vendor takes ~1 s, "
        "so a question's calls in flight overlap and miss the cache together)",
    )
    args = parser.parse_args()
    url = f"postgres://postgres@127.0.0.1:5432/{args.db}"
    prepare_database(url, args.db)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": url,
            "CELERY_TASK_ALWAYS_EAGER": "1",
            KEY_ENV: "sk-bench-loopback-not-a-secret",
        }
    )
    from tests.judge_server import LOOPBACK_JUDGES  # the loopback judge over http

    os.environ.update(LOOPBACK_JUDGES)
    ctx = set_up(args)
    try:
        parts = [SECTIONS[name](ctx) for name in SECTIONS if not args.only or name in args.only]
    finally:
        ctx.server.stop()
    text = render(ctx, parts)
    print(text)
    if not args.no_write:
        write_section(text)


if __name__ == "__main__":
    main()
