# Every target creates the virtualenv and installs what it needs on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: install install-dev demo test bench lint clean

$(VENV)/.core: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

# torch first, from the CPU build: otherwise megatron-core pulls gigabytes of CUDA wheels.
$(VENV)/.dev: $(VENV)/.core
	$(PIP) torch==2.13.0
	$(PIP) -e '.[dev,tokenize,bench]'
	touch $@

# NeMo Curator 1.4 for the side-by-side benchmark, in its own venv (its pins differ from ours);
# CPU torch first, and fasttext named since the text_cpu extra's source build can be skipped.
NEMO_VENV ?= .venv-nemo
$(NEMO_VENV)/.done:
	python3 -m venv $(NEMO_VENV)
	$(NEMO_VENV)/bin/python -m pip install -q torch==2.13.0
	$(NEMO_VENV)/bin/python -m pip install -q 'nemo-curator[text_cpu]==1.4.0' torch==2.13.0 pybind11
	$(NEMO_VENV)/bin/python -m pip install -q fasttext==0.9.3
	touch $@

install: $(VENV)/.core
install-dev: $(VENV)/.dev

demo: install
	$(VENV)/bin/curate run pipelines/sample.yaml
	$(VENV)/bin/curate report runs/sample

test: install-dev
	$(VENV)/bin/pytest -q

# Each benchmark writes its figures to a file under benchmarks/ (GPU ones: see results_dedup.md).
bench: install-dev $(NEMO_VENV)/.done
	$(PY) benchmarks/bench_io.py
	$(PY) benchmarks/bench_minhash.py | tee benchmarks/results_minhash.txt
	$(PY) benchmarks/dedup_quality.py | tee benchmarks/results_quality.txt
	$(PY) benchmarks/bench_fuzzy.py datatrove --mb 64 | tee benchmarks/results_fuzzy_cpu.txt
	$(PY) benchmarks/bench_tokenize.py --mb 8
	$(PY) benchmarks/bench_langid.py
	$(PY) benchmarks/kill_resume.py --tries 20
	$(PY) benchmarks/bench_decontaminate.py
	$(PY) benchmarks/bench_heuristics.py
	$(PY) benchmarks/bench_nemo.py
	$(PY) benchmarks/bench_extract.py

lint: install-dev
	$(VENV)/bin/ruff check curator tests benchmarks

clean:
	rm -rf runs bench-data
