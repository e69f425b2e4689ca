# Harmonia: the two commands the README promises are `make demo` and `make test`.
BUILD ?= build
VENV := .venv
JOBS ?= 2

.PHONY: setup build demo test test-cpp test-py lint format bench clean

setup:
	scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

## Runs the paper's section V scenario (8 instances, balanced) with every policy.
demo: build
	$(VENV)/bin/harmonia demo --out results/demo

test: build test-cpp test-py

test-cpp:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-py:
	HARMONIA_SIM=$(BUILD)/src/sim/harmonia-sim HARMONIA_BUILD=$(BUILD) \
	  $(VENV)/bin/pytest -q python/tests tests/sim tests/runtime

lint: setup
	$(VENV)/bin/ruff check python tests/sim tests/runtime scripts
	$(VENV)/bin/ruff format --check python tests/sim tests/runtime scripts
	$(VENV)/bin/mypy --config-file python/pyproject.toml python/harmonia
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.h')

format: setup
	$(VENV)/bin/ruff format python tests/sim tests/runtime scripts
	$(VENV)/bin/ruff check --fix python tests/sim tests/runtime scripts
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.h')

## Speed figures for docs/benchmarks.md (not part of the tests).
bench: build
	$(BUILD)/bench/optimizer_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/bench/requests_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	scripts/bench-sim.sh
	scripts/bench-bbio.sh
	scripts/bench-control.sh
	scripts/bench-netsim.sh
	$(VENV)/bin/python scripts/bench_bbd.py

clean:
	rm -rf $(BUILD) results
