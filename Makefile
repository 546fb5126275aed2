# Callgate developer commands. `make run` (demo, no services needed) and `make test` are the two
# set-up commands; everything else is for working on Callgate.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The API document's linter (@redocly/cli, pinned in package-lock.json).
NODE_STAMP := node_modules/.installed
API_DOCUMENT := var/openapi.json

.PHONY: run test test-faults bench lint format services services-down worker beat clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet ".[dev]"
	@touch $(STAMP)

# The embedded demo: SQLite in var/, tasks in-process, console on http://127.0.0.1:$(PORT)
# (`make run PORT=8080` for another port).
PORT ?= 8000
run: $(STAMP)
	@mkdir -p var
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py migrate --no-input
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py demo_setup --start
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

# The whole suite against PostgreSQL 15 and Redis on 127.0.0.1 (started here when not running):
# everything but fault injection, then fault injection with its totals.
test: $(STAMP)
	.ci/services up
	$(BIN)/pytest -m "not faults"
	$(BIN)/pytest -m faults tests/faults

# Fault injection alone, with real worker processes (SIGKILL, SIGTERM, Redis restarts, lost
# connections); prints the totals of faults, duplicates and lost work at the end.
test-faults: $(STAMP)
	.ci/services up
	$(BIN)/pytest -m faults tests/faults

# Benchmarks on PostgreSQL, Redis and real workers: a table, and BENCH_JSON=path writes the
# figures (BENCH_QUICK=1 for smaller sizes).
bench: $(STAMP)
	.ci/services up
	$(BIN)/python bench/run.py

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $(NODE_STAMP)

# The API document is checked twice: the API's own rules, then redocly's (redocly.yaml).
lint: $(STAMP) $(NODE_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports
	@mkdir -p var
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py lint_api_schema --file $(API_DOCUMENT)
	npx --no-install redocly lint $(API_DOCUMENT)

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

services:
	.ci/services up

services-down:
	.ci/services down

# Production-style processes (set DATABASE_URL and CELERY_BROKER_URL first; see README).
worker: $(STAMP)
	$(BIN)/celery -A config worker --loglevel=INFO --concurrency=2 --queues=callgate

beat: $(STAMP)
	$(BIN)/celery -A config beat --loglevel=INFO

clean:
	rm -rf var staticfiles .pytest_cache .mypy_cache .ruff_cache node_modules
