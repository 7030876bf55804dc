# Every target creates the virtualenv and installs what it needs on a fresh machine.
VENV ?= .venv
# The interpreter the venv is made from (the GPU containers: python3.11).
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q
# Pinned versions, given to every install as constraints: locks/cpu-dev.txt (development, CI,
# Dockerfile.cpu), locks/gpu.txt (docker/Dockerfile, docker/curator.def). `make lock` renews them.
LOCK ?= locks/cpu-dev.txt
PIN = -c $(LOCK)
# Extras for `make install` (containers: docker/Dockerfile, docker/curator.def), e.g. gpu,ray.
EXTRAS ?=
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: install install-dev browser demo test test-fast bench lint lock clean

# fasttext-numpy2-wheel (the langid extra) whatever EXTRAS says; lid.176.ftz ships inside curator.
$(VENV)/.core: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip $(PIN)
	$(PIP) -e '.$(if $(EXTRAS),[$(EXTRAS)])' $(PIN)
	$(PIP) 'fasttext-numpy2-wheel>=0.9.2' $(PIN)
	touch $@

# torch first, from the CPU build: otherwise megatron-core pulls gigabytes of CUDA wheels.
$(VENV)/.dev: $(VENV)/.core
	$(PIP) torch==2.13.0 $(PIN)
	$(PIP) -e '.[dev,tokenize,bench]' $(PIN)
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

$(VENV)/.demo: $(VENV)/.core
	$(PIP) -e '.[demo]' $(PIN)
	touch $@

install-dev: $(VENV)/.dev

# The sample's tokenizer ships in data/tokenizer/ (its README says how it was trained).
demo: $(VENV)/.demo
	$(VENV)/bin/curate run pipelines/sample.yaml

# Resolve locks/*.txt again from pyproject.toml (the newest releases the index serves; about two
# minutes), then run `make test` and commit them. locks/lock.py says what each one covers.
lock:
	$(PYTHON) locks/lock.py

# Headless Chromium for the report's browser test (skipped without it); never fatal. A fresh
# image has no package lists: then they are fetched once and the install tried again.
browser:
	command -v chromium || (command -v apt-get && (apt-get install -y -q chromium || \
	  (apt-get update -q && apt-get install -y -q chromium))) || true

test: install-dev browser
	$(VENV)/bin/pytest -q

# The fast tier (under 2 minutes on 2 cores): no whole runs, clusters, jobs, browser or GPU.
test-fast: install-dev
	$(VENV)/bin/pytest -q -m 'not slow and not browser and not gpu'

# The kill/fault tier: runs killed at named points, dying workers, budgets, interrupts, locks.
test-kill: install-dev
	$(VENV)/bin/pytest -q -m kill

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
	$(PY) benchmarks/bench_classifier.py
	$(PY) benchmarks/bench_nemo.py
	$(PY) benchmarks/bench_latex.py
	$(PY) benchmarks/bench_scaling.py  # 1, 2, 4, ... workers up to the cores
	$(PY) benchmarks/bench_scaling_extract.py  # the extraction segment, same worker counts
	$(PY) benchmarks/bench_cpu_ceiling.py  # the machine's own ceiling for that segment
	$(PY) benchmarks/bench_langid_html.py
	$(PY) benchmarks/bench_mixed_gpu.py  # GPU machines only (skips without CuPy)
	$(PY) benchmarks/bench_exact_hash.py --mb 100
	$(PY) benchmarks/bench_dedup_product.py --gb 0.05 --devices cpu --stage fuzzy --workers 2 --part-mb 10
	$(PY) benchmarks/bench_dedup_memory.py --gb 0.12 --factor 4 --devices cpu --workers 2
	$(PY) benchmarks/bench_dedup_memory.py --stage line --gb 0.5 --factor 4 --devices cpu --workers 2
	$(PY) benchmarks/bench_line_dedup.py --mb 500 --part-mb 30 --unit sentence_span  # vs datatrove's SentenceDedup, the same splits
	$(PY) benchmarks/bench_line_dedup.py --mb 500 --part-mb 30 --unit line
	$(PY) benchmarks/bench_line_dedup.py --mb 20 --part-mb 5 --unit sentence_span --splitter spacy --japanese 0  # datatrove's own splitter
	$(PY) benchmarks/bench_extract.py
	$(PY) benchmarks/bench_e2e.py --copies 1 --dir bench-data/e2e-unique --out benchmarks/results_e2e_unique.md  # whole chain vs DataTrove, each page once (the README's figure)
	$(PY) benchmarks/bench_e2e.py  # the same pages five times over
	$(PY) benchmarks/bench_incremental.py  # reruns into the same run folder vs from scratch (about 20 min)
	$(PY) benchmarks/bench_serve.py  # 50 clients polling a running run's progress (about 8 min)

lint: install-dev
	$(VENV)/bin/ruff check curator tests benchmarks locks

clean:
	rm -rf runs bench-data
