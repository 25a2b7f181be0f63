# Two set-up commands: `make demo` (serve the demo) and `make test` (the whole suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_BUNDLE := questions/fixtures/demo-bundle
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/snaglist
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test venv lint check-services clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/python manage.py migrate --verbosity 0
	$(BIN)/python manage.py import_bundle $(DEMO_BUNDLE)
	$(BIN)/python manage.py triage --benchmark uk-construction-demo
	$(BIN)/python manage.py create_demo_users
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

check-services: venv
	@DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m tests.check_services

test: check-services
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) CELERY_TASK_ALWAYS_EAGER=1 \
		$(BIN)/python -m pytest $(PYTEST_ARGS)
	env -u DATABASE_URL -u REDIS_URL CELERY_TASK_ALWAYS_EAGER=1 \
		$(BIN)/python -m pytest -m sqlite -p no:cacheprovider $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles test-artifacts
