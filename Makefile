# tokensel: `make book` builds the executed book, `make test` runs the tests (both create .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TOKENSEL_THREADS ?= 2
# OpenMP's threads (torch's) sleep when idle instead of spinning: where processes share the cores (the tests' two
# workers, the book beside the tests, the replication's workers) spinning threads take the cores from the ones
# that have work; a chapter took 70 s instead of 40 s beside two busy processes, and alone takes the same either way
export OMP_WAIT_POLICY ?= PASSIVE
# real data: the hub when reachable; a checkout with ../shared/data beside it uses that copy
export TOKENSEL_DATA_DIR ?= $(if $(wildcard ../shared/data/imdb),$(abspath ../shared/data),)

.PHONY: assignments calibrate lint replicate replicate-ci book book-student format test test-fast browser-check browser-check-book browser-check-book-pages browser-check-book-print browser-check-student pdf pdf-student bench bench-quick notebooks lab venv clean help

help:
	@echo "make book       create .venv, install pinned dependencies, execute and build the HTML book"
	@echo "make book-student  the student edition: the executed book without solutions (after make book, or runs it)"
	@echo "make assignments  the chapters as student notebooks with self-checks, no solutions (_build/assignments; grade with python -m tokensel_book grade)"
	@echo "make format     fix and format the chapters' code cells with ruff, the project's rules (make lint checks them)"
	@echo "make test       run the test suite (what CI runs)"
	@echo "make lint       ruff (format and lint) over lib, tests, benchmarks, scripts and the chapters; mypy over the library"
	@echo "make test-fast  the tests not marked slow (about a minute, for daily work)"
	@echo "make browser-check  load every page of the built book, and a chapter in JupyterLab, in headless Chromium; print the PDF (after make book and make book-student)"
	@echo "make browser-check-book / browser-check-student  the same for the full book only / the student edition only"
	@echo "make browser-check-book-pages / browser-check-book-print  the full book's check in two halves: its pages; its PDF and the lab"
	@echo "make pdf            print the built book to _build/pdf/tokensel.pdf with headless Chromium (after make book)"
	@echo "make pdf-student    print the student edition's chapters to _build/pdf/tokensel-student.pdf (after make book-student)"
	@echo "make bench      run the benchmarks at IMDB scale (not tests)"
	@echo "make bench-quick  the same benchmarks at a tenth to a fifth of the size (what CI runs)"
	@echo "make notebooks  write the paired .ipynb of every chapter"
	@echo "make lab        open the chapters as notebooks in JupyterLab (MyST rendered; failed claims reported, not fatal)"
	@echo "make replicate  every chapter's claims at fresh seeds on Dask (chapters 1-5 and the pages intro, own_data: 20 seeds, 6-7: 10), into book/recorded/replication"
	@echo "make replicate-ci  chapters 1-5 at the first fresh seed (2 workers), compared with the recorded replication"
	@echo "make calibrate  chapters 1-5 and the pages at 10 other fresh seeds: each claim's rate against the recorded one"
	@echo "make clean      remove _build"

venv: $(STAMP)

# pip by default; UV=uv (a uv executable) installs the same pinned packages with uv, several times faster, and
# UV_ARGS passes it index settings (CI passes pip's configured indexes and find-links, which uv does not read)
UV ?=
UV_ARGS ?=
PACKAGES := -e ".[test]" -e "./lib[lab]"
$(STAMP): pyproject.toml lib/pyproject.toml constraints.txt
ifeq ($(UV),)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt $(PACKAGES)
else
	$(UV) venv --quiet --seed --python $(PYTHON) $(VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python $(UV_ARGS) -c constraints.txt $(PACKAGES)
endif
	touch $(STAMP)

# one style, checked (the configuration is in pyproject.toml; CI runs it before the tests): ruff's formatter and
# linter over the library, the tests, the benchmarks, the scripts and the chapters' code cells (the formatter at
# the book's 88-character text column there; `make format` fixes them), mypy over the library
LINTED := lib tests benchmarks scripts
lint: $(STAMP)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/python -m tokensel_book format --check
	$(BIN)/mypy

# the tests run in parallel over the machine's cores (pytest-xdist; TEST_WORKERS=1 runs them in one process)
TEST_WORKERS ?= auto
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

# the built book's (after make book) and the student edition's (after make book-student) browser tests: both
# targets, or one (CI runs them side by side, the book's as soon as the book is built)
# (the book's in two halves of about equal time, which CI runs side by side: the pages; the print, the lab and
# the layout checks on pages of their own)
OWN_PAGES := tests/tokensel_book/test_layout.py::test_a_tiny_books_figures_stack_on_a_phone_and_the_measurement_sees_when_they_do_not \
  tests/tokensel_book/test_layout.py::test_the_measurement_finds_what_is_too_wide
BROWSER_BOOK_PAGES := tests/tokensel_book/test_browser.py tests/tokensel_book/test_reader_words.py tests/tokensel_book/test_layout.py \
  tests/tokensel_book/test_explorable.py $(addprefix --deselect ,$(OWN_PAGES))
BROWSER_BOOK_PRINT := tests/tokensel_book/test_pdf.py tests/tokensel_book/test_lab.py $(OWN_PAGES)
BROWSER_BOOK := tests/tokensel_book/test_browser.py tests/tokensel_book/test_reader_words.py tests/tokensel_book/test_layout.py \
  tests/tokensel_book/test_explorable.py tests/tokensel_book/test_pdf.py tests/tokensel_book/test_lab.py
BROWSER_STUDENT := tests/tokensel_book/test_student.py
browser-check: $(STAMP)
	$(BIN)/python -m pytest -q -s --browser --durations=5 $(BROWSER_BOOK) $(BROWSER_STUDENT)

browser-check-book: $(STAMP)
	$(BIN)/python -m pytest -q -s --browser --durations=5 $(BROWSER_BOOK)

browser-check-book-pages: $(STAMP)
	$(BIN)/python -m pytest -q -s --browser --durations=5 $(BROWSER_BOOK_PAGES)

browser-check-book-print: $(STAMP)
	$(BIN)/python -m pytest -q -s --browser --durations=5 $(BROWSER_BOOK_PRINT)

browser-check-student: $(STAMP)
	$(BIN)/python -m pytest -q -s --browser --durations=5 $(BROWSER_STUDENT)

# EXECUTE=force executes every page (CI does); by default a page is executed again only when its code, the
# library, the data, the settings or the installed software changed (the execution cache in _build/.jupyter_cache)
EXECUTE ?= cache
# the book uses matplotlib's inline backend whatever MPLBACKEND says: a non-interactive one (e.g.
# Agg) would leave every chapter without its figures (make browser-check counts them)
# COMPILE_KERNELS=yes compiles the numba kernels into their cache beside the book's first chapters, which use one
# core for most of their time (a fresh install: about a minute of one core that chapters 6 and 7 would otherwise
# spend; a compiled cache: a few seconds); CI compiles them in a step of its own and passes no
COMPILE_KERNELS ?= yes
book: $(STAMP)
	@case "$(EXECUTE)" in cache) ;; force) rm -rf _build/.jupyter_cache ;; \
	  *) echo "EXECUTE must be cache or force, got '$(EXECUTE)'" >&2; exit 2 ;; esac
	@case "$(COMPILE_KERNELS)" in yes|no) ;; \
	  *) echo "COMPILE_KERNELS must be yes or no, got '$(COMPILE_KERNELS)'" >&2; exit 2 ;; esac
	@# the library byte-compiled (only what changed) where the environment says not to write bytecode
	@# (PYTHONDONTWRITEBYTECODE, common in containers): every page's process would compile what it imports from source
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q lib > /dev/null
	@if [ "$(COMPILE_KERNELS)" = yes ]; then echo "compiling the kernels beside the book: _build/compile_kernels.log"; \
	  $(BIN)/python scripts/compile_kernels.py book > _build/compile_kernels.log 2>&1 & compiling=$$!; fi; \
	TOKENSEL_PROGRESS=0 HF_DATASETS_DISABLE_PROGRESS_BARS=1 PATH=$(CURDIR)/$(BIN):$$PATH \
	  MPLBACKEND=module://matplotlib_inline.backend_inline \
	  $(BIN)/jupyter-book build . --builder html -W -n --keep-going; built=$$?; \
	if [ -n "$${compiling:-}" ] && ! wait $$compiling; then \
	  cat _build/compile_kernels.log >&2; echo "compiling the kernels beside the book failed" >&2; exit 1; fi; \
	exit $$built
	@# every claim of every chapter's table must hold in its executed notebook, however a cell handled a failure
	$(BIN)/python -m tokensel_book verify _build
	@echo "The book is at $(CURDIR)/_build/html/index.html"

# the student edition: the notebooks executed by `make book` (run first when there are none), every solution
# left out (sphinx-exercise's hide_solutions; gated solutions removed from the notebooks), nothing executed again
book-student: $(STAMP)
	@[ -d _build/jupyter_execute ] || $(MAKE) book
	$(BIN)/python -m tokensel_book student _build _build/student
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/jupyter-book build _build/student --builder html -W -n --keep-going
	@echo "The student edition is at $(CURDIR)/_build/student/_build/html/index.html"

# the chapters as a class's assignments: one notebook per chapter without solutions, each exercise's self-check
# cell tagged (nothing executed); `python -m tokensel_book grade _build/assignments SUBMISSIONS` grades a class
assignments: $(STAMP)
	$(BIN)/python -m tokensel_book assignments _build/assignments

# the chapters' code cells fixed and formatted by ruff under the project's configuration (the rest of each page
# untouched); `make lint` and a test fail on a chapter that is not, or that has a finding ruff cannot fix
format: $(STAMP)
	$(BIN)/python -m tokensel_book format

# the built book as one PDF (after make book), printed by headless Chromium: _build/pdf/tokensel.pdf, with a
# title page, the contents, page numbers and a bookmark per chapter
pdf: $(STAMP)
	$(BIN)/python -m tokensel_book pdf _build/html _build/pdf/tokensel.pdf

# the student edition as one PDF (after make book-student): no solution, as in its HTML
pdf-student: $(STAMP)
	$(BIN)/python -m tokensel_book pdf _build/student/_build/html _build/pdf/tokensel-student.pdf --chapters-only

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_gradient.py
	$(BIN)/python benchmarks/bench_step.py
	$(BIN)/python benchmarks/bench_svm.py
	$(BIN)/python benchmarks/bench_variants.py
	$(BIN)/python benchmarks/bench_two_layer.py
	PATH=$(CURDIR)/$(BIN):$$PATH TOKENSEL_PROGRESS=0 $(BIN)/python benchmarks/bench_replicate.py

# CI's benchmarks: the same code and checks at a tenth to a fifth of IMDB's size (the ratios are smaller there:
# the fixed costs weigh more); `make bench` gives the IMDB-scale figures the README quotes
bench-quick: $(STAMP)
	$(BIN)/python benchmarks/bench_gradient.py --n 2500
	$(BIN)/python benchmarks/bench_svm.py --pairs 800 --irrelevant 300 --d 128
	$(BIN)/python benchmarks/bench_variants.py --n 5000
	$(BIN)/python benchmarks/bench_two_layer.py

# JupyterLab with jupytext and jupyterlab-myst (lemmas, proofs and exercises rendered). Each chapter opens
# as its .ipynb, paired with the .md by jupytext.toml: what you save goes to both, the .md stays the source.
# TOKENSEL_CLAIMS=report: a claim broken by a changed parameter is shown in red and the notebook runs on.
lab: notebooks
	TOKENSEL_CLAIMS=report PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/jupyter lab --notebook-dir=$(CURDIR) book/intro.ipynb

# the paired .ipynb of every chapter that has none yet (git-ignored); the .md is then touched so that
# jupytext reads a chapter's cells from it (the newer file of a pair) and an existing .ipynb is never overwritten
notebooks: $(STAMP)
	@for f in book/*.md; do [ -f "$${f%.md}.ipynb" ] || { $(BIN)/jupytext --quiet --to ipynb "$$f" && touch "$$f"; }; done
	@echo "chapters as notebooks: book/*.ipynb (paired with book/*.md)"

clean:
	rm -rf _build

# every claim at seeds the book never uses, each (chapter, seed) a Dask task (LocalCluster sized to the machine;
# SCHEDULER=tcp://host:8786 for a running cluster); resumable: finished tasks are skipped
SYNTHETIC := 01_model 02_one_step 03_divergence 04_selection 05_max_margin
# the other pages that record claims: the landing page and the own-data page (the Yelp sample), at SEEDS seeds
PAGES := intro own_data
SEEDS ?= 20
REAL_SEEDS ?= 10
replicate: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m tokensel_book replicate --chapters $(SYNTHETIC) $(PAGES) --seeds $(SEEDS) $(if $(SCHEDULER),--scheduler $(SCHEDULER),)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m tokensel_book replicate --chapters 06_real_data 07_beyond --seeds $(REAL_SEEDS) $(if $(SCHEDULER),--scheduler $(SCHEDULER),)

# the calibration: chapters 1-5 and the pages at ten fresh seeds past the recorded ones (which the recorded
# replication never ran), each claim's rate against the recorded one (scripts/calibrate.py)
calibrate: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m tokensel_book replicate --chapters $(SYNTHETIC) $(PAGES) --seeds 10 \
	  --first-seed $(SEEDS) --out book/recorded/calibration $(if $(SCHEDULER),--scheduler $(SCHEDULER),)
	$(BIN)/python scripts/calibrate.py book/recorded/calibration

# CI's small replication: chapters 1-5 at the first fresh seed on a 2-worker LocalCluster, every task
# compared claim by claim with the same task of the recorded replication
replicate-ci: $(STAMP)
	rm -rf _build/replication-ci
	PATH=$(CURDIR)/$(BIN):$$PATH TOKENSEL_PROGRESS=0 $(BIN)/python -m tokensel_book replicate --chapters $(SYNTHETIC) --seeds 1 \
	  --workers 2 --out _build/replication-ci --compare book/recorded/replication
