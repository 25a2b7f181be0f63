"""Settings, read from the environment (django-environ); bad values fail loudly at start-up.

Zero set-up default: with no DATABASE_URL the product runs on SQLite in the project
folder and, with no REDIS_URL, Celery tasks run eagerly in the web process.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from config.env import choice, flag, names, networks, number
from engine.bands import DEFAULT_BAND_GAP

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = flag("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str(
    "DJANGO_SECRET_KEY",
    default="insecure-dev-key-only-for-the-zero-set-up-default-change-me-0123456789",
)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "core",
    "questions",
    "scoring",
    "review",
    "interchange",
    "public",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Outside everything but SecurityMiddleware: the header is on every response, static
    # files, redirects to the login page and lock-outs included.
    "config.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.LoginRequiredMiddleware",
    # After the login check (anonymous users still go to the login page first).
    "config.middleware.BadQueryMiddleware",
    "config.middleware.MethodNotAllowedPageMiddleware",
    # Last, as django-axes asks: it turns a lock-out into the response below.
    "axes.middleware.AxesMiddleware",
]
# Server-Timing header (wall, CPU and SQL of each request; config.middleware) for
# bench/bench_load.py; first, so it covers every other middleware. Off by default.
SNAGLIST_SERVER_TIMING = flag("SNAGLIST_SERVER_TIMING", default=False)
if SNAGLIST_SERVER_TIMING:
    MIDDLEWARE.insert(0, "config.middleware.ServerTimingMiddleware")

# Content-Security-Policy of every response (config.middleware). Scripts only from this
# site's static files: no inline <script>, no on*= attribute, no eval (htmx runs with
# allowEval and allowScriptTags off and without its inline indicator <style>, see
# templates/base.html). style-src-attr allows style="" attributes only (the leaderboard's
# heat-map colours are data); they cannot run script. img-src data: for the icons of the
# admin and Swagger UI stylesheets.
CSP_DIRECTIVES = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "style-src-attr": "'unsafe-inline'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
SNAGLIST_CSP = "; ".join(f"{name} {value}" for name, value in CSP_DIRECTIVES.items())

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login rate limit (django-axes): 5 failures for one username from one address lock it
# out for 15 minutes. DRF token requests do not go through the login form.
AXES_FAILURE_LIMIT = number("SNAGLIST_LOGIN_FAILURE_LIMIT", int, 5, minimum=1)
AXES_COOLOFF_TIME = number("SNAGLIST_LOGIN_COOLOFF_HOURS", float, 0.25, above=0)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.context_processors.navigation",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
DATABASES["default"].setdefault("ATOMIC_REQUESTS", False)
# Keep a worker's database connection across requests (seconds; 0 closes it after each
# request): a new PostgreSQL connection per page cost a backend fork, authentication and
# a few ms of both cores (issue 18, load). The health check drops a connection the server
# closed (a restart) before a request uses it.
DATABASES["default"].setdefault("CONN_MAX_AGE", number("DJANGO_CONN_MAX_AGE", int, 300, minimum=0))
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several writers (web + eager tasks) share one file: wait rather than fail.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault("timeout", 20)
    # BEGIN IMMEDIATE: a transaction that reads, then writes, takes the write lock first, so
    # two such requests queue (up to `timeout`) instead of one failing with "database is
    # locked" when it upgrades its read lock (seen with two editors approving at once).
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "Europe/London"
USE_I18N = True
USE_TZ = True
DATE_FORMAT = "j F Y"
DATETIME_FORMAT = "j F Y, H:i"
SHORT_DATE_FORMAT = "d/m/Y"
SHORT_DATETIME_FORMAT = "d/m/Y H:i"
FORMAT_MODULE_PATH = ["config.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = env.path("SNAGLIST_MEDIA_ROOT", default=BASE_DIR / "media")

# --- Redis, Celery, cache -------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# memory://localhost/: the in-process broker of the eager default (a bare memory:// makes
# kombu log "No hostname was supplied" on every run).
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = flag("CELERY_TASK_ALWAYS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = number("CELERY_TASK_TIME_LIMIT", int, 3600, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = number("CELERY_TASK_SOFT_TIME_LIMIT", int, 3300, minimum=1)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT}) must be below "
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT})"
    )
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="snaglist")
# With acks_late, Redis re-delivers an unacknowledged task after this many seconds: it
# must exceed the longest task time limit, or a slow task would run twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": number(
        "CELERY_VISIBILITY_TIMEOUT", int, CELERY_TASK_TIME_LIMIT + 600, above=CELERY_TASK_TIME_LIMIT
    )
}
# Periodic work (run `celery -A config beat`, or a worker with -B): a publish whose re-scoring
# task never reached the broker is started here once the broker is back; runs whose worker
# died or whose tasks were lost are sent again (scoring.runs.services.runs.heal_runs).
CELERY_BEAT_SCHEDULE = {
    "sweep-rescore-requests": {"task": "scoring.sweep_rescore_requests", "schedule": 60.0},
    # Runs that heal themselves (issue 19): free dead pair leases, send stalled runs again.
    "heal-runs": {
        "task": "scoring.heal_runs",
        "schedule": number("SNAGLIST_HEAL_SECONDS", float, 30.0, above=0),
    },
    # Batch mode (issue 20): look at the vendor batches still out, settle the ended ones.
    "poll-batches": {
        "task": "scoring.poll_batches",
        "schedule": number("SNAGLIST_BATCH_POLL_SECONDS", float, 60.0, above=0),
    },
}

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env.str("SNAGLIST_CACHE_PREFIX", default="snaglist"),
            # Cached values are pickles that name their classes' modules: bump VERSION when a
            # cached class moves, or a deploy reads values it cannot unpickle (issue 29 moved
            # engine to engine/: ModuleNotFoundError on a board cached before).
            "VERSION": 2,
        }
    }
    # A signed-in page reads its session from Redis, not PostgreSQL; writes still go to the
    # database (issue 18, load). Only with a shared cache: a per-process cache would keep a
    # signed-out session alive in the other workers.
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# The review pages cache published editions, passages and the judge panel between requests
# (core.content_cache, issue 28) only when the cache is shared: with a per-process cache a
# command's change could not reach the web workers' memory.
SNAGLIST_CONTENT_CACHE = flag("SNAGLIST_CONTENT_CACHE", default=bool(REDIS_URL))

# --- API -------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Snaglist API",
    "DESCRIPTION": "Review and scoring of an expert-verified LLM benchmark answer key.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # /api/docs/ loads Swagger UI from static files (drf-spectacular-sidecar), not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name per shared choice set, so the schema has no duplicate enums.
    "ENUM_NAME_OVERRIDES": {
        "ReviewSourceEnum": "review.models.Source",
        "ReviewItemStatusEnum": "review.models.ReviewItem.Status",
        "ProposalStatusEnum": "review.models.Proposal.Status",
        "KeyEditionStatusEnum": "questions.models.KeyEdition.Status",
        "RunStatusEnum": "scoring.models.ScoringRun.Status",
        "RunKindEnum": "scoring.models.ScoringRun.Kind",
    },
}

# --- Domain settings (methodology.md) --------------------------------------
# Rule 9: a new band starts where the gap to the next model is >= this many points.
SNAGLIST_BAND_GAP = number("SNAGLIST_BAND_GAP", float, DEFAULT_BAND_GAP, above=0, maximum=100)
SNAGLIST_BOOTSTRAP = number("SNAGLIST_BOOTSTRAP", int, 1000, minimum=1)
SNAGLIST_BOOTSTRAP_SEED = number("SNAGLIST_BOOTSTRAP_SEED", int, 20240301, minimum=0)
# A model with fewer counted responses than this is flagged `few_counted` on the
# leaderboard and never ranked alone above models whose interval overlaps its own
# (issue 21); 0 turns the flag off.
SNAGLIST_MIN_COUNTED = number("SNAGLIST_MIN_COUNTED", int, 30, minimum=0)
# Rule 4: "any_adverse" (wrong/ungradeable in any combination) or "same_verdict".
SNAGLIST_AUDIT_EXCLUSION_RULE = choice(
    "SNAGLIST_AUDIT_EXCLUSION_RULE", "any_adverse", {"any_adverse", "same_verdict"}
)
# The composition root builds the audit -> triage chain (docs/architecture.md): the task every
# key-audit run sends its id to when it finishes. Scoring names no review code. Wiring, not
# deployment configuration: no environment variable sets it (a test turns the chain off by
# overriding it with "").
SNAGLIST_AUDIT_FOLLOW_UP_TASK = "review.triage_after_audit"
SNAGLIST_CONSENSUS_SHARE = number("SNAGLIST_CONSENSUS_SHARE", float, 0.6, above=0, maximum=1)
SNAGLIST_CONSENSUS_MIN_MODEL_SCORE = number(
    "SNAGLIST_CONSENSUS_MIN_MODEL_SCORE", float, 50.0, minimum=0, maximum=100
)
SNAGLIST_CLAIM_MINUTES = number("SNAGLIST_CLAIM_MINUTES", int, 30, minimum=1)
# Key-error reports from readers of a public results site (issue 22), per hour: from one
# network address, and to one benchmark from anyone (review.services.items.reader_report_create).
SNAGLIST_READER_REPORTS_PER_ADDRESS = number(
    "SNAGLIST_READER_REPORTS_PER_ADDRESS", int, 5, minimum=1
)
SNAGLIST_READER_REPORTS_PER_BENCHMARK = number(
    "SNAGLIST_READER_REPORTS_PER_BENCHMARK", int, 100, minimum=1
)
# Methodology rule 6 asks an editor's approval only for corrections and removals: a
# confirmation closes its item at once unless this is set (issue 18, item 3).
SNAGLIST_CONFIRMATION_NEEDS_APPROVAL = flag("SNAGLIST_CONFIRMATION_NEEDS_APPROVAL", default=False)
SNAGLIST_IMPORT_ERROR_CAP = number("SNAGLIST_IMPORT_ERROR_CAP", int, 200, minimum=1)

# --- Re-scoring workers (scoring.runs.services.tunables, scoring.runs.tasks) -------------
# Pairs per scoring.grade_chunk task. Each chunk ends by draining its calls and the next
# begins by loading its rows, so small chunks leave judge slots idle: on the throughput bench
# (bench/README.md) chunks of 50 gave 1.48x the floor, 250 1.29x, 500 1.25x, 1,000
# 1.23-1.27x. 500 calls at 16 in flight and 5 s a call take ~160 s, well inside the task's
# time limit.
SNAGLIST_RESCORE_CHUNK = number("SNAGLIST_RESCORE_CHUNK", int, 500, minimum=1)
# Seconds a claimed pair stays reserved for its worker. The worker's heartbeat renews it
# every SNAGLIST_WORKER_HEARTBEAT_SECONDS while its task runs, so 6 heartbeats are enough
# however long a judge call takes; a killed worker's pairs are free again 60 s after its
# last beat (with 900 s, the earlier default, a kill held 36 pairs for 15 minutes).
SNAGLIST_PAIR_LEASE_SECONDS = number("SNAGLIST_PAIR_LEASE_SECONDS", float, 60.0, above=0)
# Seconds between a worker's reports on a run while a task of it runs (its heartbeat); the
# run page calls a run stalled when no worker has reported on it for 3 heartbeats.
SNAGLIST_WORKER_HEARTBEAT_SECONDS = number(
    "SNAGLIST_WORKER_HEARTBEAT_SECONDS", float, 10.0, above=0
)
# The longest wait, in seconds, before heal_runs sends a stalled run again when its last
# re-send brought no worker report (issue 26 item 3): the first re-send's deadline is the stall
# time (3 heartbeats, 30 s), doubled per unanswered re-send up to this cap, so a run whose
# re-sent task is lost too (its worker killed as it took it) is sent again, never wedged.
SNAGLIST_HEAL_BACKOFF_CAP_SECONDS = number(
    "SNAGLIST_HEAL_BACKOFF_CAP_SECONDS", float, 600.0, above=0
)
# Threads one worker process may add to grade chunks (0: each chunk on its task's thread).
SNAGLIST_JUDGE_THREADS = number("SNAGLIST_JUDGE_THREADS", int, 64, minimum=0)
# Times a chunk is sent again for pairs whose judge is unavailable (0: never).
SNAGLIST_RESCORE_MAX_RETRIES = number("SNAGLIST_RESCORE_MAX_RETRIES", int, 8, minimum=0)
# Times a pair whose judge reply could not be parsed (a null grade: a refusal, say) is asked
# again by later re-scoring runs, one ask per run (0: never; issue 17). Past it, triage
# files the question as evidence `unparsed_replies`.
SNAGLIST_UNPARSED_RETRIES = number("SNAGLIST_UNPARSED_RETRIES", int, 2, minimum=0)
# Batch mode (issue 20; scoring.runs.services.batch_mode): seconds between polls of the vendor
# batches still out (the `scoring.poll_batches` beat entry). Vendors finish a batch within
# 24 h, often within minutes; a poll is one GET per open batch.
SNAGLIST_BATCH_POLL_SECONDS = CELERY_BEAT_SCHEDULE["poll-batches"]["schedule"]
# What becomes of a batch request that brought no reply (errored, expired, cancelled):
# "live" asks it again at once through the live API (full price), "batch" puts it in the
# next batch (half price, another turnaround). Either way a pair is given up (failed) after
# 3 batch attempts.
SNAGLIST_BATCH_FAILED_RETRY = choice("SNAGLIST_BATCH_FAILED_RETRY", "live", {"live", "batch"})
# In-process runs (eager tasks, no Redis: the zero set-up default, where `rescore --wait`
# or a web request waits for the run): how long, in seconds, a run's pairs whose judge is
# unavailable are asked again before they fail; the waits between rounds and the rounds
# count (issue 30 item 15: a judge that always failed kept `rescore --wait` 12 min 26 s).
SNAGLIST_EAGER_RETRY_SECONDS = number("SNAGLIST_EAGER_RETRY_SECONDS", float, 120.0, minimum=0)
# First backoff in seconds for an unavailable judge (doubles per retry, capped at 600).
SNAGLIST_RESCORE_RETRY_BASE_SECONDS = number(
    "SNAGLIST_RESCORE_RETRY_BASE_SECONDS", float, 30.0, above=0
)

# --- Where judges may send calls, and which variables may hold their keys (issue 26) ----
# A judge's base_url and api_key_env may come from a bundle (untrusted): the judges package
# checks them before every call (judges.endpoint; docs/admin.md, "Judges' addresses
# and keys"). A key variable's name must begin with one of these prefixes or be one of the
# allowed names (the vendors' SDK defaults by default).
SNAGLIST_JUDGE_KEY_ENV_PREFIX = names("SNAGLIST_JUDGE_KEY_ENV_PREFIX", ("SNAGLIST_JUDGE_KEY_",))
SNAGLIST_JUDGE_KEY_ENV_ALLOWED = names(
    "SNAGLIST_JUDGE_KEY_ENV_ALLOWED", ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
)
# Never a judge's key, whatever the two settings above say: the variables that hold the
# server's own secrets (not read from the environment, so it cannot be emptied there).
SNAGLIST_JUDGE_KEY_ENV_REFUSED = frozenset(
    {
        "DATABASE_URL",
        "DJANGO_SECRET_KEY",
        "SECRET_KEY",
        "REDIS_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "DEMO_PASSWORD",
        "EMAIL_HOST_PASSWORD",
        "EMAIL_URL",
        "PGPASSWORD",
        "TEST_DATABASE_URL",
        "TEST_REDIS_URL",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    }
)
# Hosts a judge may reach over plain http (default none: https only), e.g. "127.0.0.1" for a
# loopback judge; and address ranges allowed although not public (loopback, private,
# link-local; default none), e.g. "127.0.0.0/8". Cloud metadata addresses are always refused.
SNAGLIST_JUDGE_HTTP_HOSTS = tuple(h.lower() for h in names("SNAGLIST_JUDGE_HTTP_HOSTS", ()))
SNAGLIST_JUDGE_ALLOWED_NETWORKS = networks("SNAGLIST_JUDGE_ALLOWED_NETWORKS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {
        "handlers": ["console"],
        "level": choice(
            "DJANGO_LOG_LEVEL", "WARNING", {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
        ),
    },
}

# Serve static files from the repo's static/ folder in every mode (no collectstatic needed
# for the zero-set-up default); production may still run collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Without collectstatic, STATIC_ROOT does not exist; the finders serve static/ anyway.
# (Matched on the message: WhiteNoise attributes the warning to Django's request handler.)
warnings.filterwarnings("ignore", message=f"No directory at: {re.escape(str(STATIC_ROOT))}")
