"""Load test: 50 reviewers browsing + 5 claiming/proposing for 60 s against gunicorn.

    .venv/bin/python bench/bench_load.py [--duration 60] [--browsers 50] [--claimers 5]
        [--think-min 1.0 --think-max 3.0] [--probe 20] [--no-setup] [--no-write]

Environment: BENCH_LOAD_DB (database, default snaglist_load; dropped and re-created),
BENCH_LOAD_REDIS_URL (cache, default redis://127.0.0.1:6379/11), BENCH_LOAD_PORT (8099).

Issue 7 item 6. Loopback only. Steps (all bounded):

1. drop/recreate database snaglist_load, migrate, import the seeded full-scale bundle of
   tests/bundle_factory.py (1,001 questions, 18 models, 2 judges), triage;
2. create 55 users in group `reviewer` (one known password), and one more for the probe,
   via `manage.py shell -c`;
3. start `gunicorn config.wsgi -w 4 -b 127.0.0.1:8099` (stopped in `finally`);
4. log every user in through /accounts/login/ (GET for the csrftoken, POST the form),
   all of them before the timed window;
4b. unloaded probe: one extra user requests each route `--probe` times, one request at a
   time, reading gunicorn's Server-Timing header (config.middleware.ServerTimingMiddleware,
   SNAGLIST_SERVER_TIMING=1): server wall and CPU ms and SQL queries per route;
5. for `duration` s: browsers loop GET /review/ (random page) then 1-2 review item pages,
   with a think time between page views, each user's first request after a uniform 0 to
   think-max s (ramp-up; `--no-ramp-up` starts all at once); claimers loop claim (POST /review/next/ or
   POST /review/items/<id>/claim/ on one of the first queue rows, racing each other), then
   propose "confirm" (POST .../propose/ with the page's `version`) or release;
6. check in PostgreSQL that no claim was lost or duplicated;
7. write the "## Load" section of bench/README.md (that section only).

Every request has a timeout; the load phase stops at `duration` and waits at most
REQUEST_TIMEOUT more for requests in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import signal
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
from readme_section import write_section  # bench/ is sys.path[0] when run as a script

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")
# Each engineer's own database, Redis db and port: override with BENCH_LOAD_DB,
# BENCH_LOAD_REDIS_URL and BENCH_LOAD_PORT (defaults as before).
DB_NAME = os.environ.get("BENCH_LOAD_DB", "snaglist_load")
DB_URL = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
REDIS_URL = os.environ.get("BENCH_LOAD_REDIS_URL", "redis://127.0.0.1:6379/11")
PORT = int(os.environ.get("BENCH_LOAD_PORT", "8099"))
BASE = f"http://127.0.0.1:{PORT}"
BENCHMARK = "uk-construction-synthetic"
PASSWORD = "load-test-Pa55word!"
REQUEST_TIMEOUT = 30.0
SECTION = "## Load"
GOAL_MS = 300.0
RAMP_UP = True  # --no-ramp-up: every user's first request at the same instant (as before)

ENV = {
    **os.environ,
    "DATABASE_URL": DB_URL,
    "REDIS_URL": REDIS_URL,
    "DJANGO_SETTINGS_MODULE": "config.settings",
    # Server-Timing on every response: server time per request, apart from queueing.
    "SNAGLIST_SERVER_TIMING": "1",
}
TIMING_RE = re.compile(r"(\w+);dur=([\d.]+)(?:;desc=\"(\d+) queries\")?")

ITEM_RE = re.compile(r'href="/review/items/(\d+)/"')
VERSION_RE = re.compile(r'name="version" value="(\d+)"')


def run(cmd: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, timeout=timeout, text=True, **kw)


def setup_data() -> dict:
    pg = ["-h", "127.0.0.1", "-U", "postgres"]
    t0 = time.perf_counter()
    run(["dropdb", *pg, "--if-exists", "--force", DB_NAME])
    run(["createdb", *pg, DB_NAME])
    run([PY, "manage.py", "migrate", "-v", "0"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bundle"
        run(
            [
                PY,
                "-c",
                "import sys; sys.path.insert(0, '.');"
                "from tests.bundle_factory import write_bundle;"
                f"write_bundle({str(path)!r}, n_questions=1001, n_models=18, seed=0)",
            ]
        )
        run([PY, "manage.py", "import_bundle", str(path)], capture_output=True)
    run([PY, "manage.py", "triage", "--benchmark", BENCHMARK], capture_output=True)
    return {"setup_s": time.perf_counter() - t0}


USERS_CODE = """
import json
from django.contrib.auth.models import Group, User
from review.models import ReviewItem
g = Group.objects.get(name="reviewer")
proto = User(username="proto"); proto.set_password(%(pw)r)
for i in range(%(n)d):
    u, _ = User.objects.get_or_create(username="load%%02d" %% i)
    u.password = proto.password; u.is_active = True; u.save()
    u.groups.add(g)
qs = ReviewItem.objects.all()
print("JSON" + json.dumps({"items": qs.count(),
    "claimable": qs.filter(status__in=["open"]).count(),
    "not_closed": qs.exclude(status__in=ReviewItem.CLOSED).count()}))
"""


def create_users(n: int) -> dict:
    out = run(
        [PY, "manage.py", "shell", "-c", USERS_CODE % {"pw": PASSWORD, "n": n}],
        capture_output=True,
    ).stdout
    return json.loads(out.split("JSON", 1)[1])


CHECK_CODE = """
import json
from collections import Counter
from core.models import AuditLogEntry
from review.models import ReviewItem, Proposal
claimed = {}
for pk, user in ReviewItem.objects.filter(status="claimed").values_list("pk", "claimed_by__username"):
    claimed.setdefault(user, []).append(pk)
proposed = {}
# every proposal: a confirmation closes its item at once (issue 18), others wait as "proposed"
for item_id, user in Proposal.objects.values_list("item_id", "author__username"):
    proposed.setdefault(user, []).append(item_id)
claims = Counter()
for user, target in AuditLogEntry.objects.filter(action="review_item.claim").values_list("actor_label", "target_id"):
    claims["%s|%s" % (user, target)] += 1
bad = ReviewItem.objects.filter(status="claimed", claimed_by__isnull=True).count()
print("JSON" + json.dumps({"claimed": claimed, "proposed": proposed, "claims": claims,
    "claimed_without_holder": bad}))
"""


def db_state() -> dict:
    out = run([PY, "manage.py", "shell", "-c", CHECK_CODE], capture_output=True).stdout
    return json.loads(out.split("JSON", 1)[1])


# ------------------------------------------------------------------ the client


class Stats:
    def __init__(self) -> None:
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.status: dict[str, Counter] = defaultdict(Counter)
        self.errors: list[str] = []
        self.conflicts: Counter = Counter()  # expected: races lost (409/422/claim refused)
        self.claims: Counter = Counter()  # (user, item) -> successful claims
        self.held: dict[str, set[int]] = defaultdict(set)
        self.proposed: dict[str, set[int]] = defaultdict(set)
        self.events: Counter = Counter()
        # kind -> [(server wall ms, server CPU ms, SQL queries)] from Server-Timing
        self.server: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
        self.recording = False


def server_timing(response) -> tuple[float, float, int] | None:
    """Return (wall ms, CPU ms, SQL queries) from a response's Server-Timing, or None."""
    found = {m[0]: m for m in TIMING_RE.findall(response.headers.get("server-timing", ""))}
    if not {"app", "cpu", "db"} <= set(found):
        return None
    return float(found["app"][1]), float(found["cpu"][1]), int(found["db"][2] or 0)


async def request(stats, client, kind, method, url, *, expect=(200,), ok_extra=(), **kw):
    t0 = time.perf_counter()
    try:
        r = await client.request(method, url, **kw)
    except httpx.HTTPError as exc:
        if stats.recording:
            stats.errors.append(f"{kind} {url}: {type(exc).__name__} {exc}")
            stats.lat[kind].append((time.perf_counter() - t0) * 1000)
            stats.status[kind]["exc"] += 1
        return None
    ms = (time.perf_counter() - t0) * 1000
    if stats.recording:
        stats.lat[kind].append(ms)
        stats.status[kind][r.status_code] += 1
        timing = server_timing(r)
        if timing is not None:
            stats.server[kind].append(timing)
        if r.status_code in ok_extra:
            stats.conflicts[f"{kind} {r.status_code}"] += 1
        elif r.status_code not in expect:
            stats.errors.append(f"{kind} {url}: HTTP {r.status_code}")
    return r


def new_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=BASE,
        timeout=httpx.Timeout(REQUEST_TIMEOUT),
        follow_redirects=False,
        limits=httpx.Limits(max_connections=2),
    )


async def login(client: httpx.AsyncClient, username: str) -> None:
    r = await client.get("/accounts/login/")
    r.raise_for_status()
    token = client.cookies["csrftoken"]
    r = await client.post(
        "/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": BASE + "/accounts/login/"},
    )
    if r.status_code != 302 or "sessionid" not in client.cookies:
        raise RuntimeError(f"login of {username} failed: HTTP {r.status_code}")


def csrf(client) -> dict:
    return {"X-CSRFToken": client.cookies.get("csrftoken", ""), "Referer": BASE + "/review/"}


async def ramp_up(think, rng):
    """Wait a uniform 0..think-max s before a user's first request: users arrive spread over
    one think time, as people do (Locust's spawn rate, k6's ramping users), not all 55 in the
    same millisecond, which only measures a start-up queue of 55 requests on 4 workers."""
    if RAMP_UP:
        await asyncio.sleep(rng.uniform(0, think[1]))


async def browser(stats, client, deadline, think, n_pages, rng):
    await ramp_up(think, rng)
    while time.monotonic() < deadline:
        page = rng.randint(1, n_pages)
        r = await request(stats, client, "queue", "GET", f"/review/?page={page}")
        ids = ITEM_RE.findall(r.text) if r is not None and r.status_code == 200 else []
        for _ in range(rng.randint(1, 2)):
            if not ids or time.monotonic() >= deadline:
                break
            await asyncio.sleep(rng.uniform(*think))
            await request(stats, client, "item", "GET", f"/review/items/{rng.choice(ids)}/")
        await asyncio.sleep(rng.uniform(*think))


async def claimer(stats, client, username, deadline, think, rng):
    await ramp_up(think, rng)
    while time.monotonic() < deadline:
        item_id = None
        if rng.random() < 0.5:
            r = await request(
                stats,
                client,
                "claim_next",
                "POST",
                "/review/next/",
                data={"benchmark": BENCHMARK},
                headers=csrf(client),
                expect=(303,),
            )
            if r is None or r.status_code != 303:
                await asyncio.sleep(rng.uniform(*think))
                continue
            m = re.search(r"/review/items/(\d+)/", r.headers.get("location", ""))
            if m is None:
                stats.events["next: nothing left"] += 1
                await asyncio.sleep(rng.uniform(*think))
                continue
            item_id = int(m.group(1))
            if stats.recording:
                stats.claims[(username, item_id)] += 1
                stats.held[username].add(item_id)
            page = await request(stats, client, "item", "GET", f"/review/items/{item_id}/")
        else:
            r = await request(stats, client, "queue", "GET", "/review/?status=open")
            ids = ITEM_RE.findall(r.text) if r is not None and r.status_code == 200 else []
            if not ids:
                await asyncio.sleep(rng.uniform(*think))
                continue
            item_id = int(rng.choice(ids[:5]))  # the top rows: claimers race for them
            r = await request(
                stats,
                client,
                "claim",
                "POST",
                f"/review/items/{item_id}/claim/",
                headers=csrf(client),
                expect=(303,),
                ok_extra=(409,),
            )
            if r is None or r.status_code != 303:
                await asyncio.sleep(rng.uniform(*think))
                continue
            # Success and refusal both redirect (303) to the item; the message tells which.
            page = await request(stats, client, "item", "GET", f"/review/items/{item_id}/")
            if page is None or page.status_code != 200:
                continue
            if "You claimed" in page.text:
                if stats.recording:
                    stats.claims[(username, item_id)] += 1
                    stats.held[username].add(item_id)
            elif "cannot be claimed" in page.text or "Your claim was renewed" in page.text:
                if stats.recording:
                    stats.conflicts["claim refused (item taken)"] += 1
                await asyncio.sleep(rng.uniform(*think))
                continue
            else:
                if stats.recording:
                    stats.errors.append(f"claim {item_id}: no outcome message")
                continue
        if page is None or page.status_code != 200:
            continue
        m = VERSION_RE.search(page.text)
        if m is None:
            if stats.recording:
                stats.errors.append(f"item {item_id}: no version field")
            continue
        version = m.group(1)
        await asyncio.sleep(rng.uniform(*think))
        if rng.random() < 0.7:
            r = await request(
                stats,
                client,
                "propose",
                "POST",
                f"/review/items/{item_id}/propose/",
                data={"version": version, "action": "confirm", "reason": "", "note": "load test"},
                headers=csrf(client),
                expect=(303,),
                ok_extra=(409, 422),
            )
            if r is not None and r.status_code == 303 and stats.recording:
                stats.held[username].discard(item_id)
                stats.proposed[username].add(item_id)
        else:
            r = await request(
                stats,
                client,
                "release",
                "POST",
                f"/review/items/{item_id}/release/",
                data={"version": version},
                headers=csrf(client),
                expect=(303,),
                ok_extra=(409,),
            )
            if r is not None and r.status_code == 303:
                page = await request(stats, client, "item", "GET", f"/review/items/{item_id}/")
                if page is not None and "is back in the queue" in page.text:
                    if stats.recording:
                        stats.held[username].discard(item_id)
                        stats.events["released"] += 1
                elif stats.recording:
                    stats.errors.append(f"release {item_id}: no confirmation message")
        await asyncio.sleep(rng.uniform(*think))


async def probe(stats: Stats, client, n: int, n_pages: int) -> None:
    """Request every route `n` times, one request at a time (the unloaded figures).

    Per round: a queue page, one of its items, claim-next and the claimed item, propose
    (confirm, even rounds) or release (odd rounds), then claim a top open row and release it.
    """
    rng = random.Random(12345)
    for i in range(n):
        r = await request(stats, client, "queue", "GET", f"/review/?page={i % n_pages + 1}")
        ids = ITEM_RE.findall(r.text) if r is not None and r.status_code == 200 else []
        if ids:
            await request(stats, client, "item", "GET", f"/review/items/{rng.choice(ids)}/")
        r = await request(
            stats, client, "claim_next", "POST", "/review/next/",
            data={"benchmark": BENCHMARK}, headers=csrf(client), expect=(303,),
        )  # fmt: skip
        m = re.search(r"/review/items/(\d+)/", r.headers.get("location", "")) if r else None
        if m is not None:
            page = await request(stats, client, "item", "GET", f"/review/items/{m.group(1)}/")
            version = VERSION_RE.search(page.text).group(1) if page is not None else ""
            if i % 2 == 0:
                data = {"version": version, "action": "confirm", "reason": "", "note": "probe"}
                await request(
                    stats, client, "propose", "POST", f"/review/items/{m.group(1)}/propose/",
                    data=data, headers=csrf(client), expect=(303,),
                )  # fmt: skip
            else:
                await request(
                    stats, client, "release", "POST", f"/review/items/{m.group(1)}/release/",
                    data={"version": version}, headers=csrf(client), expect=(303,),
                )  # fmt: skip
        r = await request(stats, client, "queue", "GET", "/review/?status=open")
        ids = ITEM_RE.findall(r.text) if r is not None and r.status_code == 200 else []
        if ids:
            r = await request(
                stats, client, "claim", "POST", f"/review/items/{ids[0]}/claim/",
                headers=csrf(client), expect=(303,),
            )  # fmt: skip
            page = await request(stats, client, "item", "GET", f"/review/items/{ids[0]}/")
            m = VERSION_RE.search(page.text) if page is not None else None
            if m is not None:
                await request(
                    stats, client, "release", "POST", f"/review/items/{ids[0]}/release/",
                    data={"version": m.group(1)}, headers=csrf(client), expect=(303,),
                )  # fmt: skip


async def load(args) -> Stats:
    stats = Stats()
    users = [f"load{i:02d}" for i in range(args.browsers + args.claimers)]
    probe_user = f"load{args.browsers + args.claimers:02d}"  # not a claimer: claim check apart
    clients = {u: new_client() for u in [*users, probe_user]}
    try:
        sem = asyncio.Semaphore(6)

        async def one(u):
            async with sem:
                await asyncio.wait_for(login(clients[u], u), REQUEST_TIMEOUT * 2)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(u) for u in [*users, probe_user]))
        stats.login_s = time.perf_counter() - t0
        n_pages = max(1, -(-args.n_items // 50))  # queue pages of 50 (not-closed items)
        stats.n_pages = n_pages
        stats.probe = Stats()
        stats.probe.recording = True
        stats.probe.load_avg = os.getloadavg()
        if args.probe:
            # two rounds unrecorded first: every worker compiles its templates, fills caches
            await probe(Stats(), clients[probe_user], 2, n_pages)
            await probe(stats.probe, clients[probe_user], args.probe, n_pages)
        # Every user is signed in before the timed window opens.
        stats.recording = True
        deadline = time.monotonic() + args.duration
        think = (args.think_min, args.think_max)
        tasks = []
        for i, u in enumerate(users):
            rng = random.Random(i)
            if i < args.browsers:
                tasks.append(browser(stats, clients[u], deadline, think, n_pages, rng))
            else:
                tasks.append(claimer(stats, clients[u], u, deadline, think, rng))
        t0 = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*tasks), args.duration + REQUEST_TIMEOUT + 10)
        stats.wall_s = time.perf_counter() - t0
        stats.recording = False
    finally:
        await asyncio.gather(*(c.aclose() for c in clients.values()))
    return stats


# ------------------------------------------------------------------ gunicorn


def start_gunicorn() -> subprocess.Popen:
    log = open(Path(tempfile.gettempdir()) / "snaglist-gunicorn-load.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [GUNICORN, "config.wsgi", "-w", "4", "-b", f"127.0.0.1:{PORT}", "--timeout", "60"],
        cwd=ROOT,
        env=ENV,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("gunicorn exited; see /tmp/snaglist-gunicorn-load.log")
        try:
            if httpx.get(BASE + "/healthz", timeout=2).status_code < 500:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("gunicorn did not answer within 60 s")


def stop_gunicorn(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


# ------------------------------------------------------------------ report


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def check_claims(stats: Stats, db: dict, claimers: list[str]) -> dict:
    lost, duplicated, mismatched = [], [], []
    owners = defaultdict(list)
    for u in claimers:
        for pk in stats.held[u]:
            owners[pk].append(u)
    duplicated = [pk for pk, us in owners.items() if len(us) > 1]
    for u in claimers:
        in_db = set(db["claimed"].get(u, []))
        if in_db != stats.held[u]:
            lost.append((u, sorted(stats.held[u] - in_db), sorted(in_db - stats.held[u])))
        prop_db = set(db["proposed"].get(u, []))
        if prop_db != stats.proposed[u]:
            mismatched.append((u, "proposed", sorted(stats.proposed[u] ^ prop_db)))
    db_claims = {k: v for k, v in db["claims"].items() if k.split("|")[0] in claimers}
    client_claims = {f"{u}|{pk}": n for (u, pk), n in stats.claims.items()}
    if db_claims != client_claims:
        diff = sorted(set(db_claims.items()) ^ set(client_claims.items()))
        mismatched.append(("audit claims vs client", diff[:10]))
    return {
        "lost": lost,
        "duplicated": duplicated,
        "mismatched": mismatched,
        "claims_ok": sum(stats.claims.values()),
        "audit_claims": sum(db_claims.values()),
        "held_end": sum(len(s) for s in stats.held.values()),
        "proposed": sum(len(s) for s in stats.proposed.values()),
        "claimed_without_holder": db["claimed_without_holder"],
    }


def probe_table(args, probe: Stats) -> list[str]:
    """Return the lines of the unloaded probe's table (empty without a probe)."""
    if not args.probe or not probe.server:
        return []
    lines = [
        f"Unloaded (one client, one request at a time, {args.probe} rounds before the load;"
        f" load average {probe.load_avg[0]:.1f} at its start):",
        "",
        "| route | requests | client p50 | server p50 / max | CPU p50 | SQL queries |",
        "|---|---|---|---|---|---|",
    ]
    for k in ["queue", "item", "claim_next", "claim", "propose", "release"]:
        t = probe.server.get(k, [])
        if not t:
            continue
        srv, cpu, qs = [x[0] for x in t], [x[1] for x in t], sorted(x[2] for x in t)
        lines.append(
            f"| {k} | {len(t)} | {pct(probe.lat[k], 50):.0f} ms | {pct(srv, 50):.1f} /"
            f" {max(srv):.0f} ms | {pct(cpu, 50):.1f} ms | {qs[0]}-{qs[-1]} |"
        )
    return [*lines, ""]


def report(args, stats: Stats, check: dict, info: dict, load_avg: tuple) -> str:
    kinds = ["queue", "item", "claim_next", "claim", "propose", "release"]
    total = sum(len(v) for v in stats.lat.values())
    all_lat = [x for v in stats.lat.values() for x in v]
    get_lat = stats.lat["queue"] + stats.lat["item"]
    n_conf = sum(stats.conflicts.values())
    p95_get = pct(get_lat, 95)
    p95_all = pct(all_lat, 95)
    lines = [
        SECTION,
        "",
        "`bench/bench_load.py` (issue 7 item 6): a bounded asyncio + httpx client against",
        f"`gunicorn config.wsgi -w 4` (sync workers) on 127.0.0.1:{PORT}, which the script starts",
        f"and stops, on a fresh PostgreSQL database `{DB_NAME}` (Redis `{REDIS_URL}` as cache)",
        "holding the seeded full-scale bundle of `tests/bundle_factory.py` (1,001 questions,",
        f"18 models, 2 judges) after `triage`: {info['items']} review items, {info['claimable']} open",
        f"at the start ({stats.n_pages} queue pages of 50). {args.browsers + args.claimers} users",
        "in group `reviewer` log in through `/accounts/login/` (CSRF token from the cookie), then",
        f"for {args.duration} s:",
        "",
        f"- **{args.browsers} browsers**: GET `/review/?page=N` (random page), then 1-2 of its",
        "  review item pages `/review/items/<id>/`;",
        f"- **{args.claimers} claimers**: half the time POST `/review/next/`, otherwise GET",
        "  `/review/?status=open` and POST `/review/items/<id>/claim/` on one of the first 5 rows",
        "  (so they race each other); then read `version` from the item page and POST `propose`",
        "  (action confirm, 70 %) or `release` (30 %) with it; CSRF via `X-CSRFToken`.",
        "",
        f"Every user waits a think time of {args.think_min:g}-{args.think_max:g} s (uniform) between",
        (
            f"page views or actions, and 0-{args.think_max:g} s (uniform) before its first request"
            if RAMP_UP
            else "page views or actions; all users send their first request at the same instant"
        ),
        "(`--no-ramp-up`: all at the same instant, the start of the runs before) — a closed loop of",
        f"{args.browsers + args.claimers} users, not a flood; every request has a",
        f"{REQUEST_TIMEOUT:g} s timeout. Latency is client-side (httpx, loopback), including queueing",
        "for a free gunicorn worker; *server* is gunicorn's own time for the request (the",
        "Server-Timing header of `config.middleware.ServerTimingMiddleware`, every middleware",
        "included), *CPU* that worker's CPU time for it, *SQL* its queries. All users are signed",
        "in before the timed window.",
        "",
        *probe_table(args, stats.probe),
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared by gunicorn, PostgreSQL, Redis",
        f"and the client; Python {platform.python_version()}; load average {load_avg[0]:.1f} /",
        f"{load_avg[1]:.1f} (1 / 5 min) at the end of the run (other engineers' test suites share",
        "the machine, so figures vary from run to run).",
        "",
        f"Result: **{total:,} requests** in {stats.wall_s:.1f} s ({total / stats.wall_s:.1f} req/s),",
        f"**{len(stats.errors)} errors**, **{n_conf} expected conflicts** (lost races: "
        + (", ".join(f"{k} x{v}" for k, v in sorted(stats.conflicts.items())) or "none")
        + ").",
        "",
        "| route | requests | statuses | p50 | p95 | p99 | max | server p50 / p95 | CPU p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in kinds:
        v = stats.lat.get(k, [])
        if not v:
            continue
        sts = ", ".join(f"{s}: {n}" for s, n in sorted(stats.status[k].items(), key=str))
        srv = [t[0] for t in stats.server.get(k, [])]
        cpu = [t[1] for t in stats.server.get(k, [])]
        lines.append(
            f"| {k} | {len(v):,} | {sts} | {pct(v, 50):.0f} ms | **{pct(v, 95):.0f} ms** | "
            f"{pct(v, 99):.0f} ms | {max(v):.0f} ms | {pct(srv, 50):.0f} / {pct(srv, 95):.0f} ms"
            f" | {pct(cpu, 50):.0f} ms |"
        )
    all_srv = [t[0] for v in stats.server.values() for t in v]
    lines.append(
        f"| all | {total:,} | | {pct(all_lat, 50):.0f} ms | **{p95_all:.0f} ms** | "
        f"{pct(all_lat, 99):.0f} ms | {max(all_lat):.0f} ms | "
        f"{pct(all_srv, 50):.0f} / {pct(all_srv, 95):.0f} ms | |"
    )
    met = "met" if p95_all <= GOAL_MS else "**not met**"
    per = [k for k in kinds if stats.lat.get(k) and pct(stats.lat[k], 95) > GOAL_MS]
    lines += [
        "",
        f"Goal p95 ≤ {GOAL_MS:.0f} ms for every route: "
        + ("**not met**" if per else "met")
        + f"; routes over it: {', '.join(per) if per else 'none'}. Over all requests: {met}"
        + f" ({p95_all:.0f} ms). Browsing pages alone (queue + item): p95 {p95_get:.0f} ms.",
        "",
        "Claims, checked in the database after the run: "
        f"{check['claims_ok']} successful claims recorded by the client, {check['audit_claims']}",
        "`review_item.claim` audit entries for the claimers (compared per user and item:"
        f" {'equal' if not check['mismatched'] else 'DIFFERENT'}); "
        f"{check['proposed']} proposals, {stats.events.get('released', 0)} releases, "
        f"{check['held_end']} items still held at the end.",
        f"**Lost claims: {len(check['lost'])}** (a user's claimed items in the database differ from",
        "what the client holds after its successful claims minus releases and proposals);",
        f"**duplicated claims: {len(check['duplicated'])}** (an item two clients both believe they hold);",
        f"claimed rows without a holder: {check['claimed_without_holder']}."
        + (
            f" `/review/next/` found nothing left {stats.events['next: nothing left']} times."
            if stats.events.get("next: nothing left")
            else ""
        ),
        "",
    ]
    if stats.errors:
        lines += ["First errors:", ""] + [f"- `{e}`" for e in stats.errors[:10]] + [""]
    lines += [
        "Caveats: one run, on a shared 2-core machine where the client, the 4 gunicorn workers",
        "and PostgreSQL compete for the same cores; no think time would simply measure queueing",
        "(55 users on 4 sync workers). Claim outcomes of `POST .../claim/` are read from the",
        "flash message on the following item page (success and refusal both answer 303).",
        "Percentiles of the POST kinds rest on few samples (p95/p99 of a dozen requests is",
        "about the maximum). The wall time exceeds the load duration by the requests still in",
        "flight at the deadline (each bounded by the timeout).",
        "",
        "Re-run: `.venv/bin/python bench/bench_load.py` (drops and re-creates `snaglist_load`,",
        "or `BENCH_LOAD_DB`; `BENCH_LOAD_REDIS_URL`, `BENCH_LOAD_PORT`; rewrites this section",
        "only; `--no-write` to print only).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--browsers", type=int, default=50)
    parser.add_argument("--claimers", type=int, default=5)
    parser.add_argument("--think-min", type=float, default=1.0)
    parser.add_argument("--think-max", type=float, default=3.0)
    parser.add_argument("--probe", type=int, default=20, help="unloaded rounds (0: none)")
    parser.add_argument("--no-setup", action="store_true", help="reuse the database as is")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--no-ramp-up", action="store_true", help="all users start at once (the old start)"
    )
    args = parser.parse_args()
    global RAMP_UP
    RAMP_UP = not args.no_ramp_up
    args.duration = min(args.duration, 60.0)  # bounded

    if not args.no_setup:
        print(f"set-up: {setup_data()}", flush=True)
    info = create_users(args.browsers + args.claimers + 1)  # + the probe's user
    args.n_items = info["not_closed"]
    print(f"users created; items: {info}", flush=True)
    proc = start_gunicorn()
    try:
        stats = asyncio.run(load(args))
    finally:
        stop_gunicorn(proc)
    load_avg = os.getloadavg()
    claimers = [f"load{i:02d}" for i in range(args.browsers, args.browsers + args.claimers)]
    check = check_claims(stats, db_state(), claimers)
    print(json.dumps({k: v for k, v in check.items()}, default=str)[:2000])
    text = report(args, stats, check, info, load_avg)
    print(text)
    if stats.errors:
        print("errors:", *stats.errors[:30], sep="\n  ")
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
