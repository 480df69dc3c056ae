# Two commands for a fresh machine:  `make demo`  and  `make test`.
# Each sets up .venv (once; again when pyproject.toml changes), then runs.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch. Installing it first stops anything else from pulling a
# multi-GB CUDA build. On a GPU machine: make TORCH='torch' (or your CUDA build).
TORCH  ?= torch==2.13.0
# pytest-xdist's workers for `make test` and `make fast`: one per core this process may
# use (nproc), at most 8 (a worker holds up to 2 GiB).
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 8 ? 8 : n )))
STAMP  := $(VENV)/.mdcr-installed

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
# numba's compile cache (ranx, the BM25 sweep) lives in the demo's store, like everything
# the demo writes.
export NUMBA_CACHE_DIR ?= $(CURDIR)/data/mdcr-home/.numba_cache
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup demo test lint fast clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e '.[all,dev,ecosystem]'
	# pyserini's declared dependencies (a web stack, a CUDA torch) are not needed for BM25.
	$(BIN)/python -m pip install -q --no-deps pyserini==1.6.0
	touch $(STAMP)

# What the tests need beyond .venv, made once by `make setup` (and so by `make test`):
# - .venv-adapters: the `adapters` library's own environment, for the SPECTER2 adapter test
#   (it pins transformers 4.57; tests/integration/encoders/adapters_env/build.py). Where
#   pip cannot reach its index, setup goes on and that test is skipped, with the reason.
# - numba's compiled kernels (ranx's measures and fusions, the BM25 sweep, exact search)
#   in $NUMBA_CACHE_DIR, by tests/support/numba_warmup.py (a small pipeline whose outputs
#   are thrown away, and the ranx calls the tests make as references): every test process
#   loads them instead of compiling them. If it fails, the tests compile what they need.
ADAPTERS   := .venv-adapters/.ready
NUMBA_WARM := $(NUMBA_CACHE_DIR)/.warmed

$(ADAPTERS): $(STAMP) tests/integration/encoders/adapters_env/build.py
	$(BIN)/python tests/integration/encoders/adapters_env/build.py .venv-adapters

$(NUMBA_WARM): $(STAMP) tests/support/numba_warmup.py tests/support/numba_warmup.toml
	@echo "compiling numba's kernels for the tests into $(NUMBA_CACHE_DIR) (once, about 2 minutes)"
	@if $(BIN)/python tests/support/numba_warmup.py; then mkdir -p $(@D) && touch $@; \
	else echo "the tests compile what numba needs themselves"; fi

setup: $(STAMP) $(ADAPTERS) $(NUMBA_WARM)

demo: $(STAMP)
	$(BIN)/mdcr run pipelines/demo.toml
	@echo "Look at the rankings query by query (a local, read-only web page):"
	@echo "  $(BIN)/mdcr explore"

lint: $(STAMP)
	$(BIN)/ruff check mdcr tests scripts
	$(BIN)/ruff format --check mdcr tests scripts
	$(BIN)/mypy
	$(BIN)/vulture

# Both tiers, on every core (pytest-xdist; WORKERS=0 runs them one at a time, in this process).
# A file's tests run on one worker (its module fixtures are built once), the files with
# slow tests first (tests/conftest.py).
XDIST := -n $(WORKERS) --dist loadfile --no-loadscope-reorder
# Python's bytecode caches (__pycache__, ignored by git) even where the shell turns them off:
# without them each process the tests start (the CLI, Ray's workers) compiles mdcr again,
# and each pytest worker rewrites the tests' asserts again.
test fast: export PYTHONDONTWRITEBYTECODE :=
# ruff first (seconds); then mypy and the dead-code check beside the tests, at the lowest
# priority (nice 19): they take the CPU the tests leave idle (while a test waits on its
# subprocesses, the JVM, Ray). Their output is printed after the tests'.
test: setup
	$(BIN)/ruff check mdcr tests scripts
	$(BIN)/ruff format --check mdcr tests scripts
	@types=$$(mktemp); \
	{ echo "$(BIN)/mypy"; nice -n 19 $(BIN)/mypy && echo "$(BIN)/vulture" && nice -n 19 $(BIN)/vulture; } \
	  >"$$types" 2>&1 & \
	lint=$$!; \
	echo "$(BIN)/pytest $(XDIST)   (mypy and vulture beside it)"; \
	$(BIN)/pytest $(XDIST); tests=$$?; \
	wait $$lint; checked=$$?; cat "$$types"; rm -f "$$types"; \
	test $$tests -eq 0 && test $$checked -eq 0

# The unit tier alone (tests/unit: pure functions, no store, no JVM), after ruff: the loop
# while you work. mypy and the dead-code check run in `make lint` and `make test`.
fast: $(STAMP)
	$(BIN)/ruff check mdcr tests scripts
	$(BIN)/pytest $(XDIST) tests/unit

clean:
	rm -rf $(VENV) .venv-adapters .numba_cache .pytest_cache .mypy_cache .ruff_cache
