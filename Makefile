# The two commands of the README's quick start: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# `make run PORT=8000`, or LOUPE_PORT=8000 in the environment; HOST likewise (LOUPE_HOST).
PORT ?= $(or $(LOUPE_PORT),7860)
HOST ?= $(or $(LOUPE_HOST),127.0.0.1)

.PHONY: run test lint bench install

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, so the CPU wheel is taken and nothing pulls a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	# The project itself, editable and without resolving again what the pins above installed:
	# this gives the `loupe` command and lets `python training/sft.py` and `python bench/x.py`
	# import the packages from any directory.
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python launch.py serve --port $(PORT) --host $(HOST)

# Two workers per core: at one per core the suite kept the cores half busy (its tests wait
# on browsers, servers and child processes). A file's tests stay on one worker (they share
# its app and browser); files go out in collection order, which tests/conftest.py sorts
# longest first.
WORKERS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 1) )))
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	for f in bench/render.py bench/vet.py bench/export.py bench/store.py bench/app_latency.py; do $(BIN)/python $$f || exit 1; done
