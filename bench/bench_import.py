"""Time `import_bundle` of a full-scale bundle into PostgreSQL; write bench/README.md.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_bench \
        .venv/bin/python bench/bench_import.py [--no-write] [--runs 3]

The database named by DATABASE_URL (default snaglist_bench on 127.0.0.1) is created with
`createdb` if missing and migrated. Each run imports the seeded bundle of
tests/bundle_factory.py (1,001 questions, 18 models, 18,018 responses, 36,036 grades, 2,002
audit verdicts, 37 corrections) under a fresh benchmark name, in its own child process
(`manage.py import_bundle`, so Django start-up is included, as for a user), then times a
re-import of the same bundle (idempotent: nothing written). Target: < 20 s.

Reference, in the same run (issue 28 item 4): after each import, the rows it wrote to the
large tables (questions, key entries, responses, grades, audit verdicts) are read back with
`COPY ... TO STDOUT` and written with one raw `COPY ... FROM STDIN` per table into copies
of those tables (`CREATE TABLE ... (LIKE ... INCLUDING ALL)`: same columns and indexes, no
foreign keys or triggers) in a scratch schema, timed from the first COPY to the commit;
goal: import <= 4x that. The machine's load average at the start and the CPU time (user +
system) of each import process are recorded too (PostgreSQL's own CPU is not in it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from readme_section import write_section  # noqa: E402 (bench/ is sys.path[0])

SECTION = "## Bundle import"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/snaglist_bench"
TARGET_S = 20.0
RATIO_GOAL = 4.0
SCRATCH = "bench_import_scratch"
# The rows of one benchmark (%s: its name) in each large table the import writes.
OF_BENCHMARK = "(SELECT id FROM questions_benchmark WHERE name = %s)"
LARGE_TABLES = {
    "questions_question": f"benchmark_id = {OF_BENCHMARK}",
    "questions_keyentry": "edition_id IN (SELECT id FROM questions_keyedition "
    f"WHERE benchmark_id = {OF_BENCHMARK})",
    "questions_response": "question_id IN (SELECT id FROM questions_question "
    f"WHERE benchmark_id = {OF_BENCHMARK})",
    "scoring_grade": f"judge_id IN (SELECT id FROM scoring_judge WHERE benchmark_id = {OF_BENCHMARK})",
    "scoring_auditverdict": "auditor_id IN (SELECT id FROM scoring_judge "
    f"WHERE benchmark_id = {OF_BENCHMARK})",
}


def ensure_database(url: str) -> None:
    parsed = urlparse(url)
    if not parsed.scheme.startswith("postgres"):
        raise SystemExit("bench_import measures PostgreSQL: DATABASE_URL must be postgres://")
    name = parsed.path.lstrip("/")
    host = [
        "-h",
        parsed.hostname or "127.0.0.1",
        "-p",
        str(parsed.port or 5432),
        "-U",
        parsed.username or "postgres",
    ]
    listed = subprocess.run(["psql", *host, "-lqt"], capture_output=True, text=True, check=True)
    if name not in {line.split("|")[0].strip() for line in listed.stdout.splitlines()}:
        subprocess.run(["createdb", *host, name], check=True)


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def manage(env: dict[str, str], *args: str) -> tuple[float, subprocess.CompletedProcess, float]:
    """Run manage.py with `args`; return (wall seconds, the finished process, its CPU s)."""
    cpu = children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return elapsed, done, children_cpu() - cpu


# Run in a child process: time import_bundle alone, after Django's start-up; print JSON.
IN_PROCESS = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.db import connection
from interchange.bundles import import_bundle

def backend_cpu():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:  # PostgreSQL on another machine
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

before, wall, cpu = backend_cpu(), time.perf_counter(), time.process_time()
result = import_bundle(sys.argv[2])
wall, cpu, after = time.perf_counter() - wall, time.process_time() - cpu, backend_cpu()
assert result.created["grades"] == 36036, result.created
print(json.dumps({"wall": wall, "cpu": cpu,
                  "backend": None if before is None else after - before}))
"""


def in_process(env: dict[str, str], folder: Path) -> dict[str, float | None]:
    """Import `folder` in a fresh child process, timed after Django's start-up.

    Returns {"wall": s, "cpu": s of the Python process, "backend": s of its PostgreSQL
    backend (from /proc; None when PostgreSQL runs elsewhere)}.
    """
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(ROOT), str(folder)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"in-process import failed:\n{done.stderr}")
    return json.loads(done.stdout)


FOREIGN_KEYS = """
SELECT c.confrelid::regclass::text,
       ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
       ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)
FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.contype = 'f'
"""


def raw_copy(url: str, benchmark: str, *, foreign_keys: bool = False) -> tuple[float, int]:
    """Time a raw COPY of `benchmark`'s rows of LARGE_TABLES into scratch copies of them.

    Returns (seconds from the first COPY FROM to the commit, rows written). The scratch
    schema is made afresh and dropped afterwards. The copies have the tables' columns and
    indexes; with `foreign_keys` also each of their foreign keys, deferred to the commit as
    Django's are, pointing at the scratch copy of the referenced table when it is one of
    LARGE_TABLES and at the real table otherwise (judges, models, editions ...), so that
    PostgreSQL checks every row's references as it does for the import.
    """
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as conn:
        data = {}
        for table, where in LARGE_TABLES.items():
            query = sql.SQL("COPY (SELECT * FROM {} WHERE " + where + ") TO STDOUT").format(
                sql.Identifier(table)
            )
            with conn.cursor() as cur, cur.copy(query, [benchmark] * where.count("%s")) as copy:
                data[table] = b"".join(bytes(block) for block in copy)
        with conn.cursor() as cur:
            cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCRATCH)))
            cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCRATCH)))
            for table in data:
                cur.execute(
                    sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(
                        sql.Identifier(SCRATCH, table), sql.Identifier(table)
                    )
                )
            for table in data if foreign_keys else ():
                cur.execute(FOREIGN_KEYS, [table])
                for parent, columns, parent_columns in cur.fetchall():
                    target = (SCRATCH, parent) if parent in data else (parent,)
                    cur.execute(
                        sql.SQL(
                            "ALTER TABLE {} ADD FOREIGN KEY ({}) REFERENCES {} ({}) "
                            "DEFERRABLE INITIALLY DEFERRED"
                        ).format(
                            sql.Identifier(SCRATCH, table),
                            sql.SQL(", ").join(map(sql.Identifier, columns)),
                            sql.Identifier(*target),
                            sql.SQL(", ").join(map(sql.Identifier, parent_columns)),
                        )
                    )
        conn.commit()
        start = time.perf_counter()
        with conn.cursor() as cur:
            for table, block in data.items():
                with cur.copy(
                    sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(SCRATCH, table))
                ) as copy:
                    copy.write(block)
        conn.commit()
        elapsed = time.perf_counter() - start
        rows = sum(block.count(b"\n") for block in data.values())
        with conn.cursor() as cur:
            cur.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(SCRATCH)))
        conn.commit()
    return elapsed, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not touch bench/README.md")
    args = parser.parse_args()
    load = os.getloadavg()
    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    ensure_database(url)
    env = {**os.environ, "DATABASE_URL": url}
    manage(env, "migrate", "-v0")

    from tests.bundle_factory import write_bundle

    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        folder = work / "bundle"
        t0 = time.perf_counter()
        counts = write_bundle(folder, corrections=37, seed=0)
        generated = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in folder.iterdir())
        times, cpus, reimports, copies, copies_fk, alone = [], [], [], [], [], []
        for _ in range(args.runs):
            manifest = json.loads((folder / "manifest.json").read_text())
            manifest["name"] = f"bench-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}-{len(times)}"
            (folder / "manifest.json").write_text(json.dumps(manifest))
            elapsed, done, cpu = manage(env, "import_bundle", str(folder), "--format", "json")
            result = json.loads(done.stdout)
            assert result["created"]["grades"] == 36036, result
            times.append(elapsed)
            cpus.append(cpu)
            copied, rows = raw_copy(url, manifest["name"])
            copies.append(copied)
            copies_fk.append(raw_copy(url, manifest["name"], foreign_keys=True)[0])
            again, done, _ = manage(env, "import_bundle", str(folder), "--format", "json")
            assert json.loads(done.stdout)["already_imported"] is True
            reimports.append(again)
            manifest["name"] += "-alone"
            (folder / "manifest.json").write_text(json.dumps(manifest))
            alone.append(in_process(env, folder))
        startup, _, startup_cpu = manage(env, "check")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    best, worst = min(times), max(times)
    reference = min(copies)
    reference_fk = min(copies_fk)
    ratio = best / reference
    ratio_net = (best - startup) / reference
    proper = min(alone, key=lambda a: a["wall"])
    backend = "n/a" if proper["backend"] is None else f"{proper['backend']:.1f} s"
    lines = [
        SECTION,
        "",
        "`bench/bench_import.py`: `manage.py import_bundle` of the seeded full-scale bundle of",
        "`tests/bundle_factory.py` into PostgreSQL, each run in a fresh process under a new",
        "benchmark name (Django start-up included), then the same bundle again (idempotent:",
        "compared row by row, nothing written).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, PostgreSQL on 127.0.0.1. Load average at the start: "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min).",
        "",
        "| bundle | size | import (best / worst of "
        f"{len(times)}) | re-import (no-op) | `manage.py check` alone | target | met |",
        "|---|---|---|---|---|---|---|",
        f"| {counts['questions.jsonl']:,} questions, {counts['models.csv']} models, "
        f"{counts['responses.jsonl']:,} responses, {counts['grades.jsonl']:,} grades, "
        f"{counts['audits.jsonl']:,} audit verdicts, {counts['corrections.jsonl']} corrections "
        f"| {size / 1024 / 1024:.1f} MiB | **{best:.1f} s** / {worst:.1f} s "
        f"| {min(reimports):.1f} s | {startup:.1f} s | < {TARGET_S:.0f} s "
        f"| {'yes' if worst < TARGET_S else 'NO'} |",
        "",
        "| import CPU (user + sys of the process, best / worst) | `check` CPU "
        f"| raw COPY of the same {rows:,} rows (best of {len(copies)}) "
        "| import / raw COPY | (import - `check`) / raw COPY | goal | met |",
        "|---|---|---|---|---|---|---|",
        f"| {min(cpus):.1f} s / {max(cpus):.1f} s | {startup_cpu:.1f} s | {reference:.2f} s "
        f"| {ratio:.1f}x | {ratio_net:.1f}x | <= {RATIO_GOAL:.0f}x "
        f"| {'yes' if ratio <= RATIO_GOAL else 'NO'} |",
        "",
        "| import alone, after start-up (best of "
        f"{len(alone)}): wall | its Python CPU | its PostgreSQL backend's CPU "
        "| import alone / raw COPY | goal | met "
        f"| raw COPY with the foreign keys (best of {len(copies_fk)}) "
        "| import alone / that | met |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {proper['wall']:.1f} s | {proper['cpu']:.1f} s | {backend} "
        f"| {proper['wall'] / reference:.1f}x | <= {RATIO_GOAL:.0f}x "
        f"| {'yes' if proper['wall'] <= RATIO_GOAL * reference else 'NO'} "
        f"| {reference_fk:.2f} s | {proper['wall'] / reference_fk:.1f}x "
        f"| {'yes' if proper['wall'] <= RATIO_GOAL * reference_fk else 'NO'} |",
        "",
        "The raw COPY writes the rows the import wrote to questions, key entries, responses,",
        "grades and audit verdicts, read back from those tables, into copies of them (same",
        "columns and indexes, no foreign keys or triggers) in a scratch schema: one",
        "`COPY ... FROM STDIN` per table and the commit, timed in this process; *with the",
        "foreign keys* the copies also have the tables' foreign keys (deferred to the commit,",
        "as Django's are), so PostgreSQL checks each row's references as it does for the",
        'import: the integrity the import keeps, which the first reference does not pay. "Import',
        'alone" is `import_bundle` of the same bundle (another name) in a fresh process,',
        "timed from after `django.setup()` to its commit; the backend's CPU is read from",
        "/proc (PostgreSQL runs on this machine). Wall times are only comparable at equal",
        "load: see the load average above.",
        "",
        f"(Generating the bundle took {generated:.1f} s and is not counted.) How it stays fast:",
        "one validation pass in Python over the decoded lines, then one query per table to",
        "build natural-key -> pk maps, then on PostgreSQL one `COPY ... FROM STDIN` per table",
        "(pks taken first from the table's sequence in one query; `bulk_create` on SQLite);",
        "no query per row. The original key is inserted into a draft edition and published in the",
        "same transaction, so the immutability triggers cost one lookup per key entry only.",
        "",
        "Re-run: `DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_bench "
        ".venv/bin/python bench/bench_import.py` (rewrites this section only).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
