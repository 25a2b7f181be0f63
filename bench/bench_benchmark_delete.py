"""Time `manage.py delete_benchmark` on the demo bundle (issue 26, part 5).

Usage (from the project root; needs PostgreSQL; the database is created if absent and the
demo benchmark in it is replaced)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_delete_bench \\
        .venv/bin/python bench/bench_benchmark_delete.py [--repeat 3]

Set-up (not timed): migrate, import questions/fixtures/demo-bundle. Timed: the delete
(questions.benchmark_delete.delete_benchmark: one transaction), wall time and the SQL
statements it sends; then the admin's delete page for a freshly imported copy (refused
before it collects rows). The issue's figure for the page before: 4,087 queries, 76 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/snaglist_delete_bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not os.environ["DATABASE_URL"].startswith("postgres"):
        raise SystemExit("bench_benchmark_delete measures PostgreSQL: DATABASE_URL=postgres://")
    import psycopg

    base, name = os.environ["DATABASE_URL"].rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as pg:
        if not pg.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            pg.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from questions.benchmark_delete import delete_benchmark
    from questions.models import Benchmark, Question
    from scoring.models import Grade

    call_command("migrate", verbosity=0)
    demo = ROOT / "questions" / "fixtures" / "demo-bundle"
    for _ in range(args.repeat):
        for old in Benchmark.objects.filter(name="uk-construction-demo"):
            delete_benchmark(old)
        call_command("import_bundle", str(demo), verbosity=0)
        bench = Benchmark.objects.get(name="uk-construction-demo")
        questions = Question.objects.filter(benchmark=bench).count()
        grades = Grade.objects.filter(judge__benchmark=bench).count()
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            counts = delete_benchmark(bench)
            seconds = time.perf_counter() - started
        print(
            f"delete_benchmark: {questions} questions, {grades} grades, {sum(counts.values())} "
            f"rows in {len(counts)} tables: {len(queries)} queries, {seconds:.2f} s"
        )
    call_command("import_bundle", str(demo), verbosity=0)
    bench = Benchmark.objects.get(name="uk-construction-demo")
    user = User.objects.filter(username="bench-delete-admin").first() or (
        User.objects.create_superuser("bench-delete-admin", "a@example.org", "x")
    )
    client = Client()
    client.force_login(user)
    client.get("/admin/")  # the first request loads the URLconf and admin: not the page's
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        page = client.get(f"/admin/questions/benchmark/{bench.pk}/delete/")
        seconds = time.perf_counter() - started
    print(
        f"admin delete page (refused, {page.status_code}): {len(queries)} queries, "
        f"{seconds * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
