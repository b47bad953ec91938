# cellfabric — set up, run, test. Everything runs from the project venv in .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TARGET ?=
TARGET_FLAG := $(if $(TARGET),--target $(TARGET),)
PYTEST_FLAGS ?= -q -ra --durations=30

.PHONY: setup deps venv run test test-unit test-sim test-ptf test-e2e bench lint clean \
        conformance conformance-expected test-toolchain test-reliability test-tutorials

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

test:  ## everything CI runs: unit, simulator, PTF (each module a test), Mininet e2e, reliability, STF corpus and p4lang/tutorials (if ../shared)
	$(BIN)/pytest $(PYTEST_FLAGS) tests/unit tests/sim tests/ptfsuite tests/e2e tests/reliability tests/conformance tests/tutorials

test-unit:
	$(BIN)/pytest $(PYTEST_FLAGS) tests/unit

test-ptf:  ## real PTF output: every PTF module, each on a fresh switch of the chosen TARGET
	$(BIN)/python -m netlab.ptf_runner --all $(TARGET_FLAG)

test-sim:  ## the simulator's exactness and determinism tests (tests/sim)
	$(BIN)/pytest $(PYTEST_FLAGS) tests/sim

test-e2e:
	$(BIN)/pytest $(PYTEST_FLAGS) tests/e2e

test-tutorials:  ## p4lang/tutorials' 12 exercises unchanged on p4sim and real BMv2 (needs ../shared), flags, P4Info, warnings
	$(BIN)/pytest $(PYTEST_FLAGS) tests/tutorials

test-reliability:  ## bad-request battery (p4sim, and real BMv2 if ../shared/toolchains), fuzz, kill -9 loop
	$(BIN)/pytest $(PYTEST_FLAGS) tests/reliability

bench:  ## benchmarks: ratios measured side by side; results in bench/results and the README
	@mkdir -p bench/results
	@for b in compiler switch controlplane hosts sweep fabric sim trace; do \
	  echo "== bench/$${b}_bench.py"; \
	  $(BIN)/python bench/$${b}_bench.py | tee bench/results/$$b.txt || exit 1; done
	$(BIN)/python bench/make_table.py

# p4c's STF corpus (../shared/conformance/p4c-stf, or $(CORPUS)) on every target and mix.
SHARED ?= $(abspath ..)/shared
CORPUS ?= $(SHARED)/conformance/p4c-stf/p4_16_samples
CONF_OUT ?= results/conformance
CONF_TARGETS ?= embedded mixed-p4c-on-p4sim bmv2 mixed-p4sim-on-bmv2

conformance:  ## the corpus on every target (real ones need the p4lang toolchain on PATH)
	@if [ ! -d "$(CORPUS)" ]; then echo "conformance: no corpus at $(CORPUS): skipped"; exit 0; fi; \
	mkdir -p $(CONF_OUT); status=0; for t in $(CONF_TARGETS); do \
	  echo "== conformance --target $$t (table: $(CONF_OUT)/$$t.txt, JSON: $(CONF_OUT)/$$t.json)"; \
	  $(BIN)/p4sim conformance $(CORPUS) -q -j 2 --target $$t --json $(CONF_OUT)/$$t.json \
	    > $(CONF_OUT)/$$t.txt 2>&1; rc=$$?; tail -2 $(CONF_OUT)/$$t.txt; \
	  [ $$rc -le 1 ] || status=1; done; exit $$status

conformance-expected:  ## regenerate tests/conformance/expected-*.json (known failures)
	$(BIN)/p4sim conformance $(CORPUS) -q --target embedded \
	  --write-expected tests/conformance/expected-embedded.json | tail -2
	$(BIN)/p4sim conformance $(CORPUS) -q --target mixed-p4sim-on-bmv2 \
	  --write-expected tests/conformance/expected-mixed-p4sim-on-bmv2.json | tail -2

# Every PTF module on real BMv2 (PTF_BMV2_SELECT='-k EXPR' picks some); its bursts arrive whole
# since netlab sizes BMv2's libpcap rings for the MTU (netlab/capture.py).
PTF_BMV2_SELECT ?=

test-toolchain:  ## needs the real p4lang toolchain on PATH: real p4c, PTF, corpus and the fat-tree on BMv2
	$(BIN)/pytest $(PYTEST_FLAGS) tests/toolchain \
	  tests/conformance/test_corpus.py::test_corpus_p4sim_json_on_real_bmv2 \
	  tests/e2e/test_fattree.py -k "bmv2 or toolchain or corpus"
	$(BIN)/pytest $(PYTEST_FLAGS) tests/e2e/test_nos_inband.py -k bmv2
	CELLFABRIC_TARGET=bmv2 $(BIN)/pytest $(PYTEST_FLAGS) tests/ptfsuite $(PTF_BMV2_SELECT)

lint:
	$(BIN)/ruff check .

clean:  ## removes only what the build and runs made here
	rm -rf build .pytest_cache .ruff_cache cellfabric.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print -exec rm -rf {} +
