# Harmonia: the two commands the README promises are `make demo` and `make test`.
BUILD ?= build
VENV := .venv
JOBS ?= 2

SANITIZE_BUILD ?= build-sanitize
# The C++ tests that need no simulator, fuzzers included, and the daemons the attack and load
# tests start, under AddressSanitizer and UBSan.
SANITIZE_TESTS := common_tests core_tests coordination_tests schedd_tests bbd_tests bbio_api_test
SANITIZE_PROGRAMS := harmonia-bbd harmonia-bbctl harmonia-schedd harmonia-schedctl harmonia \
  bbio_driver harmonia-recover
# A 16 MiB quarantine of freed memory (ASan's default, 256 MiB, would fail the tests that bound
# a daemon's memory).
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=16 \
  UBSAN_OPTIONS=print_stacktrace=1
TSAN_BUILD ?= build-tsan
# The C++ tests of code that runs threads (the node's store and monitor, the scheduler's service,
# the staging core and its agent, the shared sockets and logs), under ThreadSanitizer.
TSAN_TESTS := bbd_tests schedd_tests common_tests staged_file_tests agent_tests

.PHONY: setup build demo test test-cpp test-py sanitize lint format bench mutate fuzz clean \
  package package-test

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

## ASan + UBSan build of the policy core, the daemons, the node store and libharmonia: their
## unit tests and fuzzers, then the daemons under the buffer-node and limits tests (CI runs it
## after `make test`).
sanitize: setup
	cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DHARMONIA_SANITIZE=ON -DHARMONIA_BUILD_BENCHMARKS=OFF
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target $(SANITIZE_TESTS) $(SANITIZE_PROGRAMS)
	$(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j $(JOBS) \
	  -E '_NOT_BUILT|^netsim_routes|^netsim_packet'
	$(SANITIZE_ENV) HARMONIA_BUILD=$(SANITIZE_BUILD) \
	  $(VENV)/bin/pytest -q tests/runtime/test_bbd.py tests/runtime/test_limits.py \
	  tests/runtime/test_bbd_stage_in.py
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DHARMONIA_THREAD_SANITIZE=ON -DHARMONIA_BUILD_BENCHMARKS=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS) \
	  -E '_NOT_BUILT|^netsim_routes|^netsim_packet|^bbio_api$$'

lint: setup
	$(VENV)/bin/ruff check python tests/sim tests/runtime tests/fsoracle tests/packaging scripts
	$(VENV)/bin/ruff format --check python tests/sim tests/runtime tests/fsoracle tests/packaging \
	  scripts
	$(VENV)/bin/mypy --config-file python/pyproject.toml python/harmonia
	MYPYPATH=python:tests/fsoracle $(VENV)/bin/mypy --config-file python/pyproject.toml \
	  tests/fsoracle/fsoracle
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.h')
	scripts/clang-tidy.sh $(BUILD)

format: setup
	$(VENV)/bin/ruff format python tests/sim tests/runtime tests/fsoracle tests/packaging scripts
	$(VENV)/bin/ruff check --fix python tests/sim tests/runtime tests/fsoracle tests/packaging scripts
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.h')

## Speed figures for docs/benchmarks.md (not part of the tests).
bench: build
	$(BUILD)/bench/optimizer_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/bench/requests_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/bench/auto_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/bench/store_bench --mib 512 --rounds 5
	scripts/bench-sim.sh
	scripts/bench-bbio.sh
	scripts/bench-control.sh
	scripts/bench-netsim.sh
	$(VENV)/bin/python scripts/bench_bbd.py
	$(VENV)/bin/python scripts/bench_agents.py --out results/agents

## Mutation testing of the policy core (docs/benchmarks.md): every policy's cost made constant
## and its queue reversed, plus a seeded sample of universalmutator's operator mutants
## (MUTANTS=0: all of them), each built into core_tests and run. About 7 s per mutant.
MUTANTS ?= 150
mutate: setup
	$(VENV)/bin/python scripts/mutate.py --sample $(MUTANTS) --out results/mutation

## The differential and crash tester of libharmonia for HOURS (docs/testing.md): every new
## failure is shrunk and saved in results/fsoracle/ as a regression file with its seed.
HOURS ?= 1
fuzz: build
	HARMONIA_BUILD=$(BUILD) PYTHONPATH=tests/fsoracle $(VENV)/bin/python -m fsoracle.fuzz \
	  --hours $(HOURS) --out results/fsoracle

## The Debian packages (docs/deploy.md): a build with the /usr prefix, packed by CPack into
## $(PACKAGE_BUILD)/harmonia_*.deb and harmonia-simulators_*.deb.
PACKAGE_BUILD ?= build-package
package: setup
	cmake -S . -B $(PACKAGE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_INSTALL_PREFIX=/usr -DHARMONIA_BUILD_TESTS=OFF -DHARMONIA_BUILD_BENCHMARKS=OFF
	cmake --build $(PACKAGE_BUILD) -j $(JOBS)
	cd $(PACKAGE_BUILD) && cpack

## The packages installed on a clean Debian 12 booted with systemd in a container: the units
## started, stopped, killed and restarted (tests/packaging; minutes, and needs root).
package-test: package
	PACKAGE_BUILD=$(PACKAGE_BUILD) $(VENV)/bin/pytest -q tests/packaging

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(TSAN_BUILD) $(PACKAGE_BUILD) results
