"""Detection benchmark (issue 27 item 5): queue against baseline on labelled corpora; triage time.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_detect_bench \
        .venv/bin/python bench/bench_detect.py [--no-write] [--label BEFORE|AFTER] [--skip-full]

For each corpus of ../shared/data/detect/ (cruxeval-dev, gsm8k-dev) and for
../shared/data/bundles/mtbench-reference, and bench/data/numbered-options (conventions none
of those uses: options numbered 1-5, <answer> tags, true/false; 6 planted keys): a fresh PostgreSQL database (dropped and created
from a migrated template), `import_bundle`, `triage` with the defaults (timed in the child
process, Django start-up excluded), `queue --format json`, then the corpus's own `score.py`
run on that queue (it prints P@8/20/50 and recall per label for the queue and for the
baseline). MT-Bench has no labels or score.py of its own: its labels are the hand-solved
ground truth of docs/detectors.md (104, 105, 111, 114 known wrong; the rest sound), written
to a scratch folder beside a copy of its bundle whose grades are made 0/1 for the baseline
(a 1-10 grade in the lower half of the scale, 1-5, counts as "off the key"), and gsm8k-dev's
score.py (byte-identical to cruxeval-dev's) is run on it. Then full scale: the seeded
1,001-question, 18-model bundle of tests/bundle_factory.py, imported and triaged (goal
< 30 s for triage). Writes the "## Detection" section of bench/README.md, keeping any
earlier run recorded under another --label.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
CORPORA = [
    ("cruxeval-dev", SHARED / "detect" / "cruxeval-dev"),
    ("gsm8k-dev", SHARED / "detect" / "gsm8k-dev"),
    ("mtbench-reference", SHARED / "bundles" / "mtbench-reference"),
    ("numbered-options", ROOT / "bench" / "data" / "numbered-options"),
]
SCORE_PY = SHARED / "detect" / "gsm8k-dev" / "score.py"
MTBENCH_KNOWN_WRONG = {"104", "105", "111", "114"}  # docs/detectors.md, solved by hand
SECTION = "## Detection"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/snaglist_detect_bench"
TARGET_S = 30.0

CHILD = r"""
import json, sys, time, django
django.setup()
from django.core.management import call_command
from questions.models import Benchmark
from review.triage import triage_run
folder, out = sys.argv[1], sys.argv[2]
call_command("import_bundle", folder, verbosity=0)
name = json.load(open(folder + "/manifest.json"))["name"]
benchmark = Benchmark.objects.get(name=name)
profile_to = sys.argv[3] if len(sys.argv) > 3 else ""
if profile_to:
    from pyinstrument import Profiler
    profiler = Profiler()
    profiler.start()
start = time.perf_counter()
counts = triage_run(benchmark=benchmark)
elapsed = time.perf_counter() - start
if profile_to:
    profiler.stop()
    open(profile_to, "w").write(profiler.output_text(unicode=True, show_all=False))
json.dump({"name": name, "triage_s": elapsed, "by_source": counts["by_source"],
           "open_items": counts["open_items"]}, open(out, "w"))
"""


def _pg(url: str) -> tuple[list[str], str]:
    parsed = urlparse(url)
    if not parsed.scheme.startswith("postgres"):
        raise SystemExit("bench_detect measures PostgreSQL: DATABASE_URL must be postgres://")
    host = ["-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432)]
    return host + ["-U", parsed.username or "postgres"], parsed.path.lstrip("/")


def fresh_database(url: str, template: str) -> None:
    """Drop the database of `url` and create it again as a copy of the migrated `template`."""
    host, name = _pg(url)
    subprocess.run(["dropdb", *host, "--if-exists", name], check=True)
    subprocess.run(["createdb", *host, "-T", template, name], check=True)


def make_template(url: str) -> str:
    """Create and migrate a template database once; return its name."""
    host, name = _pg(url)
    template = f"{name}_template"
    subprocess.run(["dropdb", *host, "--if-exists", template], check=True)
    subprocess.run(["createdb", *host, template], check=True)
    tpl_url = url.rsplit("/", 1)[0] + "/" + template
    run_manage({**os.environ, "DATABASE_URL": tpl_url}, "migrate", "-v0")
    return template


def run_manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def import_and_triage(env: dict[str, str], folder: Path, work: Path, profile: str = "") -> dict:
    """Import `folder` and triage it in a child process; return its timing and counts.

    `profile`: a file to write a pyinstrument profile of the triage to ("" = none; the
    profiler slows the run, so a profiled time is not the figure recorded).
    """
    out = work / "triage.json"
    child_env = {
        **env,
        "DJANGO_SETTINGS_MODULE": env.get("DJANGO_SETTINGS_MODULE", "config.settings"),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(out), *([profile] if profile else [])],
        env=child_env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"import and triage of {folder} failed:\n{done.stderr}")
    return json.loads(out.read_text())


def mtbench_scoring_folder(source: Path, work: Path) -> Path:
    """Write labels.json and a 0/1 copy of grades.jsonl for score.py (module docstring)."""
    folder = work / "mtbench-scoring"
    (folder / "bundle").mkdir(parents=True)
    ids = [
        json.loads(line)["question_id"]
        for line in open(source / "questions.jsonl", encoding="utf-8")
    ]
    labels = {q: ("known_wrong" if q in MTBENCH_KNOWN_WRONG else "sound") for q in ids}
    (folder / "labels.json").write_text(json.dumps({"labels": labels}))
    with open(folder / "bundle" / "grades.jsonl", "w", encoding="utf-8") as out:
        for line in open(source / "grades.jsonl", encoding="utf-8"):
            row = json.loads(line)
            if row["grade"] is not None:
                row["grade"] = 0 if row["grade"] <= 5 else 1
            out.write(json.dumps(row) + "\n")
    return folder


def score(queue_json: Path, scoring_dir: Path) -> str:
    """Run score.py on a queue (the corpus's own; never copied); return what it prints."""
    script = scoring_dir / "score.py" if (scoring_dir / "score.py").exists() else SCORE_PY
    done = subprocess.run(
        [sys.executable, str(script), str(queue_json), str(scoring_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def parse_score(text: str) -> dict[str, dict[str, str]]:
    """Return {"queue"/"baseline": {"P@8": "5/8", ..., "recall planted": "30/30", ...}}."""
    out: dict[str, dict[str, str]] = {}
    part = None
    for line in text.splitlines():
        if line.startswith("product queue"):
            part = "queue"
            out[part] = {"ranked": line.split("ranked ")[1]}
        elif line.startswith("baseline"):
            part = "baseline"
            out[part] = {"ranked": line.split("ranked ")[1]}
        elif part and (m := re.match(r"\s+(P@\d+) = (\d+/\d+) = ([\d.]+)", line)):
            out[part][m.group(1)] = m.group(3)
        elif part and (m := re.match(r"\s+recall (\w+): (\d+/\d+)", line)):
            out[part][f"recall {m.group(1)}"] = m.group(2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="do not touch bench/README.md")
    parser.add_argument("--label", default="AFTER", help="name of this run in the README")
    parser.add_argument("--skip-full", action="store_true", help="corpora only")
    parser.add_argument("--full-only", action="store_true", help="the full-scale timing only")
    parser.add_argument(
        "--profile",
        metavar="FILE",
        default="",
        help="full scale only: write a pyinstrument profile of its triage to FILE "
        "(nothing recorded in the README)",
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    env = {**os.environ, "DATABASE_URL": url}
    template = make_template(url)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    rows, printed = [], []
    work = Path(tempfile.mkdtemp(prefix="bench-detect-"))
    try:
        for name, path in [] if (args.profile or args.full_only) else CORPORA:
            fresh_database(url, template)
            bundle = path / "bundle" if (path / "bundle").is_dir() else path
            result = import_and_triage(env, bundle, work)
            queue = work / f"{name}-queue.json"
            queue.write_text(
                run_manage(env, "queue", "--benchmark", result["name"], "--format", "json")
            )
            scoring = (
                path if (path / "labels.json").exists() else mtbench_scoring_folder(path, work)
            )
            text = score(queue, scoring)
            printed.append(f"### {name}\n{text}")
            print(f"== {name}: triage {result['triage_s']:.2f} s\n{text}", flush=True)
            rows.append((name, result, parse_score(text)))
        full = None
        if not args.skip_full:
            from tests.bundle_factory import write_bundle

            fresh_database(url, template)
            folder = work / "full"
            counts = write_bundle(folder, corrections=37, seed=0)
            full = (counts, import_and_triage(env, folder, work, args.profile))
            print(f"== full scale: triage {full[1]['triage_s']:.2f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        host, _ = _pg(url)
        subprocess.run(["dropdb", *host, "--if-exists", template], check=False)

    text = render(args.label, commit, rows, full)
    print(text)
    if args.profile:
        print(f"profile written to {args.profile}")
    elif not args.no_write:
        write_section(args.label, text)


def render(label: str, commit: str, rows: list, full) -> str:
    lines = [
        f"### {label} (commit {commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, PostgreSQL on 127.0.0.1; load average "
        f"{os.getloadavg()[0]:.1f} when the run ended (other sessions share the machine).",
        "",
        "| corpus | ranking | places | P@8 | P@20 | P@50 | recall planted | recall known wrong "
        "| triage |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result, scored in rows:
        triage = f"{result['triage_s']:.2f} s"
        for part in ("queue", "baseline"):
            s = scored.get(part, {})
            lines.append(
                f"| {name} | {part} | {s.get('ranked', '')} | {s.get('P@8', '')} "
                f"| {s.get('P@20', '')} | {s.get('P@50', '')} | {s.get('recall planted', '–')} "
                f"| {s.get('recall known_wrong', '–')} "
                f"| {triage if part == 'queue' else ''} |"
            )
    if full:
        counts, result = full
        lines += [
            "",
            f"Full scale ({counts['questions.jsonl']:,} questions, {counts['models.csv']} models, "
            f"{counts['responses.jsonl']:,} responses, {counts['grades.jsonl']:,} grades): "
            f"triage **{result['triage_s']:.1f} s** (goal < {TARGET_S:.0f} s: "
            f"{'met' if result['triage_s'] < TARGET_S else 'NOT met'}); "
            f"{result['open_items']} open items.",
        ]
    lines += [
        "",
        "Evidence raised per corpus (by source): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(result["by_source"].items()) if v)
            for name, result, _ in rows
        ),
        "",
    ]
    return "\n".join(lines)


INTRO = [
    SECTION,
    "",
    "`bench/bench_detect.py` (issue 27 item 5): each corpus is imported into a fresh PostgreSQL",
    "database and triaged with the defaults; the queue is scored by the `score.py` beside the",
    "corpus (run, not copied): precision at 8/20/50 and recall per label for the queue and for",
    "the baseline (questions ranked by the share of models whose final answer differs from",
    "the key). Recall is within the queue's length for both. MT-Bench: labels from",
    "docs/detectors.md (4 known wrong), baseline from its 1-10 grades (1-5 = off the key).",
    "The triage time is `triage_run` alone (Django start-up and import excluded).",
    "",
    "Re-run: `DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_detect_bench "
    ".venv/bin/python bench/bench_detect.py --label AFTER` (rewrites its own run only).",
    "",
]


def write_section(label: str, text: str) -> None:
    """Replace this run's label (or add it) inside the "## Detection" section of bench/README.md."""
    path = ROOT / "bench" / "README.md"
    current = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    found = pattern.search(current)
    runs: dict[str, str] = {}
    if found:
        for m in re.finditer(r"^### (\S+).*?(?=^### |\Z)", found.group(0), re.S | re.M):
            runs[m.group(1)] = m.group(0).rstrip("\n") + "\n"
    runs[label] = text.rstrip("\n") + "\n"
    body = "\n".join(INTRO) + "\n" + "\n".join(runs[k] for k in runs) + "\n"
    if found:
        updated = current[: found.start()] + body + current[found.end() :]
    else:
        updated = current.rstrip("\n") + "\n\n" + body
    path.write_text(updated, encoding="utf-8")


if __name__ == "__main__":
    main()
