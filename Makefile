# libdml's front door. `make run` and `make test` work on a fresh Debian 12
# machine: they install what is missing (scripts/setup.sh), build, and run.

BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# A failing test's whole output (seed, assertion, sanitizer report) goes to
# the log: ctest would cut it at 300 kB.
CTEST_OUTPUT = --output-on-failure --test-output-size-failed 16777216
# Debian's interpreter, whatever python3 a user's PATH finds first.
PYTHON ?= /usr/bin/python3
PYTHON_DIR ?= $(BUILD_DIR)/python

.PHONY: all setup build build-asan build-tsan build-fuzz run test test-format test-release python-package test-python \
	test-asan test-tsan test-fuzz fuzz fuzz-seeds bench bench-python install package clean

all: build

setup:
	@bash scripts/setup.sh

CONFIGURE = cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DDML_WERROR=ON $(CMAKE_FLAGS)
COMPILE = cmake --build $(BUILD_DIR) -j $(JOBS)

build: setup
	$(CONFIGURE)
	$(COMPILE)

build-asan: setup
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDML_WERROR=ON \
	  -DDML_SANITIZE=address,undefined -DDML_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j $(JOBS)

# ThreadSanitizer needs clang's OpenMP (libomp) with its TSan annotations (archer).
build-tsan: setup
	CC=clang cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDML_WERROR=ON \
	  -DDML_SANITIZE=thread -DDML_CUDA=OFF -DDML_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_DIR) -j $(JOBS)

# libFuzzer targets (fuzz/README.md): clang, coverage, ASan + UBSan.
build-fuzz: setup
	CC=clang cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDML_WERROR=ON -DDML_FUZZ=ON \
	  -DDML_CUDA=OFF -DDML_BUILD_TESTS=OFF -DDML_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j $(JOBS)

# The main job: a short tour of the operators (dmlrun's embedded default
# model), each dispatch timed over 20 iterations and each result checked.
# Quiet: one line per step, a failing step's output in full.
run: setup
	@scripts/quiet.sh "configure ($(BUILD_DIR))" $(CONFIGURE)
	@scripts/quiet.sh "build" $(COMPILE)
	@$(BUILD_DIR)/tools/dmlrun/dmlrun --iterations 20

test-release: build
	cd $(BUILD_DIR) && ctest $(CTEST_OUTPUT) -j $(JOBS)

# The Python package (python/), built against $(BUILD_DIR)'s libdml.a the way
# a user installs it, then its pytest suite. Any pytest failure fails make,
# including exit 5 (no tests collected).
python-package: build
	rm -rf $(PYTHON_DIR)
	LIBDML_BUILD_DIR=$(abspath $(BUILD_DIR)) $(PYTHON) -m pip install --quiet --no-build-isolation --no-index \
	  --no-deps --target $(PYTHON_DIR) ./python

test-python: python-package
	cd $(PYTHON_DIR) && PYTHONPATH=$(abspath $(PYTHON_DIR)) $(PYTHON) -m pytest -p no:cacheprovider -ra \
	  $(CURDIR)/python/tests

test-asan: build-asan
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest $(CTEST_OUTPUT) -j $(JOBS)

test-tsan: build-tsan
	cd $(TSAN_DIR) && OMP_TOOL_LIBRARIES=$(ARCHER) TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest $(CTEST_OUTPUT) -j $(JOBS)

ARCHER ?= $(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so))

# Each fuzz target replays its corpus (fuzz/corpus), then fuzzes for
# FUZZ_SECONDS: 10 minutes each with `make fuzz`, 1 minute each in `make test`.
fuzz: build-fuzz
	bash fuzz/run.sh $(FUZZ_DIR) $(or $(FUZZ_SECONDS),600)

test-fuzz: build-fuzz
	bash fuzz/run.sh $(FUZZ_DIR) $(or $(FUZZ_SECONDS),60)

# Regenerates the seed inputs of fuzz/corpus from the example models.
fuzz-seeds: build-fuzz
	rm -f fuzz/corpus/*/seed_*
	$(FUZZ_DIR)/fuzz/make_seeds fuzz/corpus

# The sources match .clang-format (scripts/check_format.sh).
test-format: setup
	bash scripts/check_format.sh

# Every test: the format check, the release build's, the Python package's,
# under ASan + UBSan, and under ThreadSanitizer (OpenMP kernels included);
# then the fuzz targets.
test: test-format test-release test-python test-asan test-tsan test-fuzz

# Benchmarks against the peers (oneDNN from libdnnl-dev on the CPU): every
# bench_* program built, each printing its table and writing
# $(BUILD_DIR)/bench/<program>.csv beside it.
bench: build
	@set -e; for program in $(BUILD_DIR)/bench/bench_*; do \
	  case "$$program" in *.csv|*/bench_cuda) continue;; esac; \
	  [ -f "$$program" ] && [ -x "$$program" ] || continue; \
	  echo "== $$program (CSV: $$program.csv)"; \
	  "$$program" --csv "$$program.csv"; \
	done
	@if [ -x $(BUILD_DIR)/bench/bench_cuda ] && nvidia-smi -L > /dev/null 2>&1; then bench/gpu_bench.sh $(BUILD_DIR); fi

# libdml.torch.roi_align against torchvision.ops.roi_align, forward and backward.
bench-python: python-package
	PYTHONPATH=$(abspath $(PYTHON_DIR)) $(PYTHON) bench/bench_roi_align_torch.py

install: build
	cmake --install $(BUILD_DIR)

# The Debian package: $(BUILD_DIR)/libdml_<version>_amd64.deb.
package: build
	cd $(BUILD_DIR) && cpack

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
