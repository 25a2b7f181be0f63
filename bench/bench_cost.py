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
backend - and give them a price set (PRICES: illustrative per-million list prices, set by
this script; the product has none built in).

Runs are started with `scoring.run_start` executed eagerly in this process
(CELERY_TASK_ALWAYS_EAGER: the same chunk path a worker takes, without a broker), so a
run is one process's work; the throughput of the worker is bench_judge_throughput.py's.

Sections: SECTIONS maps a name to a function(Context) -> Markdown lines; they run in that
order and their lines form the "## Cost" section of bench/README.md. Add a section (the
estimate against the actual, batch against live) by writing its function and listing it.
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
KEY_ENV = "SNAGLIST_BENCH_JUDGE_KEY"
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
    server = JudgeServer().start()
    judges = list(Judge.objects.filter(benchmark_id=edition.benchmark_id, role="judge"))
    for judge in judges:
        sdk = BACKENDS[judge.judge_id]
        judge.backend, judge.model, judge.api_key_env = sdk, f"loopback-{sdk}", KEY_ENV
        judge.base_url = server.url + "/v1" if sdk == "openai" else server.url
        judge.backend_settings = {"max_retries": 2, "timeout": 30}
        judge.price_currency = "USD"
        for name, value in PRICES[judge.judge_id].items():
            setattr(judge, name, value)
        judge.save()
    return Context(args=args, edition=edition, judges=judges, server=server)


class TeeCache:
    """Stands in for the server's PrefixCache: answers with one at RUN_MIN_TOKENS and
    replays every request through one per REPLAY_MIN_TOKENS, tallying per minimum and
    vendor the prompt tokens billed and the tokens read from / written to the cache."""

    def __init__(self) -> None:
        from tests.judge_server import PrefixCache

        self.caches = {n: PrefixCache(min_tokens=n) for n in (RUN_MIN_TOKENS, *REPLAY_MIN_TOKENS)}
        self.min_tokens, self.ready = RUN_MIN_TOKENS, "arrival"
        self.tally: dict[tuple[int, str], list[int]] = {}

    def lookup(self, flavour: str, request: dict[str, Any]) -> Any:
        from tests.judge_server import prompt_tokens

        billed = prompt_tokens(request)
        for n, cache in self.caches.items():
            found = cache.lookup(flavour, request)
            row = self.tally.setdefault((n, flavour), [0, 0, 0])
            row[0] += billed
            row[1] += found.read
            row[2] += found.write
            if n == RUN_MIN_TOKENS:
                answer = found
        return answer

    def remember(self, found: Any) -> None:  # "arrival": lookup already remembered
        pass


def grade_run(ctx: Context, version: str) -> dict[str, Any]:
    """Set every judge's prompt_version to `version` (every pair is then needed again),
    run a grading run eagerly through the loopback server; return its figures."""
    from scoring import services
    from scoring.costs import calls_cost
    from scoring.models import Judge, JudgeCall
    from scoring.tasks import run_start

    Judge.objects.filter(pk__in=[j.pk for j in ctx.judges]).update(prompt_version=version)
    judges = list(Judge.objects.filter(pk__in=[j.pk for j in ctx.judges]))
    tee = TeeCache()
    ctx.server.prefix_cache = tee
    ctx.server.reset()
    run = services.scoring_run_create(edition=ctx.edition, judges=judges, enqueue=False)
    started = time.perf_counter()
    run_start.apply(args=(run.pk,))
    wall = time.perf_counter() - started
    run.refresh_from_db()
    assert run.status == "complete" and run.failed == 0, (run.status, run.failed, run.error)
    ctx.server.requests.clear()
    return {
        "version": version,
        "run": run,
        "wall_s": wall,
        "cost": calls_cost(JudgeCall.objects.filter(run=run)),
        "tally": tee.tally,
        "prefix_tokens": prefix_tokens(ctx, version),
    }


def prefix_tokens(ctx: Context, version: str) -> list[int]:
    """Return the loopback token count of each question's shared prompt prefix at `version`."""
    from scoring.judges import GradingInput, render_judge_prompt
    from scoring.services.backends import citation_text
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
    input, cache reads and writes, the ledger's output tokens, priced by scoring.costs."""
    from scoring.costs import Prices, tokens_cost

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
        "  usage priced by scoring.costs.calls_cost), checked against the server's count of the",
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
        "- The emulation makes a prefix readable once a request carrying it has arrived. The",
        "  vendors make it readable once the first response begins, so a question's calls sent",
        "  together (a judge's window of `concurrency` calls in flight) miss together: with",
        "  18 responses a question and 32 calls in flight per judge, a live run would read less",
        '  than this (not measured here); `server.prefix_cache.ready = "reply"` emulates it.',
    ]
    return lines


SECTIONS: dict[str, Callable[[Context], list[str]]] = {"cache": section_cache}


def render(ctx: Context, parts: list[list[str]]) -> str:
    """Return the "## Cost" section: the set-up, then each section's lines."""
    a = ctx.args
    scale = (
        "the full-scale generated benchmark (1,001 questions x 18 models x 2 judges)"
        if a.questions >= 1001
        else f"a subset of the generated benchmark: {a.questions} questions x 18 models x 2 judges"
    )
    head = [
        SECTION,
        "",
        f"`bench/bench_cost.py{'' if a.questions >= 1001 else f' --questions {a.questions}'}` "
        f"(issue 20): {scale}, graded through the official SDKs",
        "against `tests/judge_server.py`, which reports usage as each vendor does and emulates",
        "their prompt caches (OpenAI: the longest prefix seen before, in 128-token steps from",
        "the minimum; Anthropic: the blocks up to the one marked cache_control, written on first",
        "sight at 1.25x the input price, read after at the cached price). Prices (USD per",
        "million input / cached input / output): "
        + "; ".join(
            f"{j} {p['price_input']} / {p['price_cached_input']} / {p['price_output']}"
            for j, p in PRICES.items()
        )
        + " (illustrative, set by the script).",
        *(f"- {n}" for n in ctx.notes),
        "",
    ]
    body = [line for part in parts for line in [*part, ""]]
    return "\n".join(head + body).rstrip("\n") + "\n"


def write_section(text: str) -> None:
    """Replace (or append) the "## Cost" section of bench/README.md only."""
    path = ROOT / "bench" / "README.md"
    current = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text + "\n", current)
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    path.write_text(updated, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=1001, help="of the 1,001 (default all)")
    parser.add_argument("--db", default="snaglist_cost", help="database to drop and create")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append", help="sections")
    parser.add_argument("--no-write", action="store_true", help="print only")
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
