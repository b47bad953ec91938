# cellfabric — set up, run, test. Everything runs from the project venv in .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TARGET ?=
TARGET_FLAG := $(if $(TARGET),--target $(TARGET),)
PYTEST_FLAGS ?= -q -ra

.PHONY: setup deps venv run test test-unit test-sim test-ptf test-e2e bench lint clean

setup: deps venv  ## system packages + venv + editable install

deps:
	scripts/install-deps.sh

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python scripts/link-mininet.py

run:  ## the main job: an emulated fabric on the embedded target, with a report
	$(BIN)/cellfabric run $(TARGET_FLAG) $(RUN_ARGS)

test:  ## everything CI runs: unit, PTF (each module a test) and Mininet e2e, one pytest run
	$(BIN)/pytest $(PYTEST_FLAGS) tests/unit tests/sim tests/ptfsuite tests/e2e

test-unit:
	$(BIN)/pytest $(PYTEST_FLAGS) tests/unit

test-ptf:  ## real PTF output: one switch, every PTF module (forwarder smoke test first)
	$(BIN)/python -m netlab.ptf_runner --dut forwarder test_harness_forwarder
	$(BIN)/python -m netlab.ptf_runner $(TARGET_FLAG) --ports 4 '^test_harness_forwarder'

test-sim:  ## the simulator's exactness and determinism tests (tests/sim)
	$(BIN)/pytest $(PYTEST_FLAGS) tests/sim

test-e2e:
	$(BIN)/pytest $(PYTEST_FLAGS) tests/e2e

bench:  ## benchmarks: ratios measured side by side; results in bench/results and the README
	@mkdir -p bench/results
	@for b in compiler switch controlplane hosts sweep fabric sim; do \
	  echo "== bench/$${b}_bench.py"; \
	  $(BIN)/python bench/$${b}_bench.py | tee bench/results/$$b.txt || exit 1; done
	$(BIN)/python bench/make_table.py

lint:
	$(BIN)/ruff check .

clean:  ## removes only what the build and runs made here
	rm -rf build .pytest_cache .ruff_cache cellfabric.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print -exec rm -rf {} +
