# Two commands matter: `make demo` and `make test`. Both set up what is missing first.
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.iopilot-setup
LIB   := src/iopilot/_lib/libiopilot.so

.PHONY: setup demo test lint bench clean runtime kernels mutation

EXAMPLE := build/examples/mpi_small_writes

FFI := src/iopilot/_lib/darshan_ffi.py

setup: $(STAMP) runtime kernels $(EXAMPLE) $(FFI)

# The C runtime; its own Makefile rebuilds only what changed.
runtime: $(STAMP)
	@$(MAKE) -s -C runtime

# The I/O kernels of `iopilot bench` (built here, never at run time).
kernels: $(STAMP)
	@$(MAKE) -s -C kernels

# PyDarshan's C declarations parsed once here, never by a report at run time.
$(FFI): $(STAMP) tools/build_darshan_ffi.py src/iopilot/sources/darshan_library.py
	@$(PY) tools/build_darshan_ffi.py $@

# The built-in example program of `make demo`.
$(EXAMPLE): examples/mpi_small_writes.c $(STAMP)
	@mkdir -p $(dir $@)
	@mpicc -O2 -Wall -Wextra -Werror -o $@ $<

# Re-run set-up only when the dependencies change (or the venv is gone).
$(STAMP): pyproject.toml tools/bootstrap.sh
	@VENV=$(VENV) bash tools/bootstrap.sh
	@touch $@

demo: setup
	@$(PY) -m iopilot demo

test: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/python -m pytest -q

lint: setup
	$(VENV)/bin/ruff check src tests

# Speed and memory of `iopilot report` per log (a benchmark, not a test).
bench: setup
	@$(PY) -m iopilot bench diagnose $(or $(LOGS),$(wildcard ../shared/darshan-logs),$(shell $(PY) -c 'import iopilot.demo as d; print(d.example_dir())'))

# Share of small deliberate bugs (mutants) the tests catch: mutmut's in the
# Python folders checks/, sources/, tune/, overlap/ and report/ ([tool.mutmut]
# in pyproject.toml), then tools/mutate_c.py's in the C runtime (runtime/src:
# behind.c, direct.c, settings.c, records.c; each mutant built with the
# library and sanitizer programs, then its tests run against that build).
# Slow: a benchmark, not a test.  All mutants take many hours on 2 cores;
# SAMPLE=N runs a seeded random sample of N of each kind (SEED=S, CSAMPLE=N
# for the C side alone; mutmut's N shared equally by its folders) and prints
# each folder's score, `runtime` included, with its 95 % interval.
# PARTS=python or PARTS=c runs one kind only.
PARTS ?= python c
# The tests import the mutated copy (mutants/src), never the installed package;
# the directory exists before Python starts, or the import system skips it.
MUTMUT = PYTHONPATH=$(CURDIR)/mutants/src $(VENV)/bin/mutmut run --max-children $(or $(JOBS),2)
mutation: setup
	@rm -rf mutants mutants-c
ifneq ($(filter python,$(PARTS)),)
	@$(VENV)/bin/python -m pip install -q --disable-pip-version-check "mutmut>=3.3"
	@mkdir -p mutants/src
ifdef SAMPLE
	@$(MUTMUT) "no-mutant-has-this-name" >/dev/null 2>&1 || true
	@$(MUTMUT) $$($(VENV)/bin/python tools/mutation_sample.py $(SAMPLE) --equal --seed $(or $(SEED),1)) \
	    || true
else
	@$(MUTMUT) || true
endif
endif
ifneq ($(filter c,$(PARTS)),)
	@$(PY) tools/mutate_c.py --jobs $(or $(JOBS),1) --seed $(or $(SEED),1) \
	    $(if $(or $(CSAMPLE),$(SAMPLE)),--sample $(or $(CSAMPLE),$(SAMPLE)))
endif
	@$(VENV)/bin/python tools/mutation_score.py --by-file

clean:
	rm -rf $(VENV) build demo-output .pytest_cache .ruff_cache mutants mutants-c
	$(MAKE) -C runtime clean
	$(MAKE) -C kernels clean
