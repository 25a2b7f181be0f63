# Two set-up commands: `make demo` (serve the demo) and `make test` (the whole suite).
# `make demo` installs only what the product needs; `make test` and `make lint` add the dev
# extras. `make test` first runs scripts/setup-test-env, which installs Chromium and
# redis-server when missing (INSTALL_SYSTEM_PACKAGES=0 forbids it), starts PostgreSQL and
# Redis when down (START_SERVICES=0 forbids it) and stops in seconds with the fix if a
# prerequisite is still missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-dev
DEMO_BUNDLE := questions/fixtures/demo-bundle
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/snaglist
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
HOST ?= 127.0.0.1
PORT ?= 8000
# The product's own packages, byte-compiled before each demo and test run (see bytecode).
APPS := config core questions review scoring public interchange engine judges manage.py
INSTALL_SYSTEM_PACKAGES ?= 1
START_SERVICES ?= 1
# pytest-xdist workers for the PostgreSQL pass (0 runs it in one process). Four on two cores:
# the suite waits on subprocesses (Celery workers, Chromium, leases running out), so two
# workers kept only 1.0-1.3 cores busy (9:55 against 8:05 for four, bench/README.md). Each
# worker has its own test database and Redis database (tests/xdist_isolation.py).
TEST_WORKERS ?= 4
# Fixed passwords for the demo users (`make demo DEMO_PASSWORD=...`); only `demo` sees it.
unexport DEMO_PASSWORD

.PHONY: demo test venv runtime bytecode setup-test-env lint check-services clean

# The product alone (what `make demo` needs).
runtime: $(RUNTIME_STAMP)

# pip's own byte-compiling is serial (half of the install's time); compileall -j0 does it on
# every core afterwards. It must happen at install: machines and images that set
# PYTHONDONTWRITEBYTECODE=1 never write a .pyc, so without it every process (each command,
# web and worker start, pytest) compiled Django, DRF and the rest from source again
# (bench/bench_startup.py). The packages' own test folders (8 of the runtime venv's 15 MB of
# source, never imported by the product) are left out: 13 s instead of 20 s on 2 cores.
VENV_COMPILE := $(BIN)/python -m compileall -q -j0 -x '/tests/' $(VENV)/lib > /dev/null
$(RUNTIME_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e .
	$(VENV_COMPILE)
	touch $(RUNTIME_STAMP)

# The product plus the dev extras (pytest, Playwright, ruff ...).
venv: $(STAMP)

$(STAMP): $(RUNTIME_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	$(VENV_COMPILE)
	touch $(STAMP)

# Our own modules, compiled where the venv's are (only changed files are compiled again).
bytecode: runtime
	$(BIN)/python -m compileall -q -j0 $(APPS) > /dev/null

demo: export DEMO_PASSWORD := $(DEMO_PASSWORD)
demo: runtime bytecode
	$(BIN)/python manage.py migrate --verbosity 0
	$(BIN)/python manage.py import_bundle $(DEMO_BUNDLE)
	$(BIN)/python manage.py triage --benchmark uk-construction-demo
	$(BIN)/python manage.py create_demo_users
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# System packages, services, ../shared, disk: set up what may be, then fail fast with the fix.
setup-test-env:
	@PY=$(PY) TEST_DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) \
		INSTALL_SYSTEM_PACKAGES=$(INSTALL_SYSTEM_PACKAGES) START_SERVICES=$(START_SERVICES) \
		scripts/setup-test-env

check-services: venv
	@DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m tests.check_services

# setup-test-env runs first (seconds), before the install (minutes on a new machine).
# The SQLite pass runs the tests marked `sqlite`; it may select none when PYTEST_ARGS
# narrows the run (pytest's exit 5), which is then not a failure. It runs beside the
# PostgreSQL pass, niced, its output kept in test-artifacts/sqlite-pass.log and printed
# after: the PostgreSQL pass waits on subprocesses and keeps ~1.4 of the 2 cores busy, so
# the SQLite pass's 17 s fit in the idle CPU instead of adding to the wall time.
# pytest may write bytecode even where PYTHONDONTWRITEBYTECODE=1 is set: its assertion
# rewriting of the test modules (half of collection's CPU) is cached only as bytecode in
# tests/__pycache__, so with the variable set every pytest process, each xdist worker
# included, rewrote all of them again.
test: setup-test-env check-services bytecode
	mkdir -p test-artifacts
	@env -u PYTHONDONTWRITEBYTECODE -u DATABASE_URL -u REDIS_URL CELERY_TASK_ALWAYS_EAGER=1 \
		nice -n 10 $(BIN)/python -m pytest -m sqlite -p no:cacheprovider $(PYTEST_ARGS) \
		> test-artifacts/sqlite-pass.log 2>&1 & sqlite_pass=$$!; \
	env -u PYTHONDONTWRITEBYTECODE \
		DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) CELERY_TASK_ALWAYS_EAGER=1 \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxschedchunk 1 $(PYTEST_ARGS); pg_rc=$$?; \
	wait $$sqlite_pass; sqlite_rc=$$?; \
	echo "== SQLite pass (tests marked sqlite; ran beside the PostgreSQL pass) =="; \
	cat test-artifacts/sqlite-pass.log; \
	$(if $(PYTEST_ARGS),test $$sqlite_rc -eq 5 && sqlite_rc=0;) \
	echo "PostgreSQL pass exit $$pg_rc, SQLite pass exit $$sqlite_rc"; \
	test $$pg_rc -eq 0 && test $$sqlite_rc -eq 0

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles test-artifacts
