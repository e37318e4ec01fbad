# Development tasks. `make demo` and `make test` are all you need; both create .venv first.

PYTHON ?= python3
VENV = .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed

# Every distribution of the repository; a new connectors/<name>/ is picked up automatically.
PYPROJECTS = pyproject.toml $(wildcard plugins/*/pyproject.toml) $(wildcard connectors/*/pyproject.toml)
# The option reference covers the first-party connectors (those under connectors/).
DOC_DISTRIBUTIONS = $(patsubst connectors/%/pyproject.toml,--distribution microbatch-%,$(wildcard connectors/*/pyproject.toml))

.PHONY: install demo test test-services lint format typecheck bench docs clean distclean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Editable installs of the core (with dev tools), the testkit (with the clients and
# testcontainers its Kafka and PostgreSQL fixtures use), the template and every connector, in
# one pip run; repeated only when a pyproject.toml changed.
$(STAMP): $(PYPROJECTS) | $(BIN)/python
	set -e; \
	set -- -e '.[dev]' -e 'plugins/testkit[services]'; \
	for dir in plugins/template plugins/demo connectors/*/; do \
		if [ -f "$$dir/pyproject.toml" ]; then set -- "$$@" -e "$${dir%/}"; fi; \
	done; \
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$$@"
	touch $@

demo: install
	$(BIN)/microbatch demo

# The slowest tests are listed at the end, to see where the time goes on a slower machine.
test: install lint typecheck
	$(BIN)/python -m pytest -p no:cacheprovider --durations=25

# Only the tests that need Kafka or PostgreSQL (the `services` marker), from the provider
# MICROBATCH_SERVICES names: `MICROBATCH_SERVICES=docker make test-services`.
test-services: install
	$(BIN)/python -m pytest -p no:cacheprovider --durations=25 -m services

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	@set -e; for script in integration/bench/bench_*.py; do \
		[ -e "$$script" ] || { echo "no benchmark in integration/bench/"; break; }; \
		echo "== $$script"; $(BIN)/python "$$script"; \
	done

docs: install
	$(BIN)/microbatch docs options --output docs/options.md $(DOC_DISTRIBUTIONS)

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache $(STAMP)
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -type d -print \
		| xargs rm -rf

distclean: clean
	rm -rf $(VENV)
