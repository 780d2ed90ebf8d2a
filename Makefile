# fuserank: the two commands are `make serve` and `make test`; both set everything up.
BUILD ?= build
CONFIG ?= config/fuserank.yaml
CUDA ?= AUTO
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build serve test test-unit test-fuzz test-sanitize bench bench-kserve bench-peers \
	format-check check-layers lint clean

all: build

deps:
	@bash scripts/install-deps.sh

# Configures $(BUILD) when it is new, when BUILD_TYPE or CUDA differ from its cache, or when
# CMAKE_FLAGS is given (scripts/configure.sh); else ninja re-runs cmake when it needs to.
configure: deps
	bash scripts/configure.sh $(BUILD) $(BUILD_TYPE) $(CUDA) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

serve: build
	$(BUILD)/bin/fuserank-server --config $(CONFIG)

# ctest, failing when nothing is selected, then the skipped tests checked: with CI set, a test
# skipped that CI should run fails (scripts/run-ctest.sh, scripts/ci-expected-skips.txt).
test: build
	bash scripts/run-ctest.sh $(BUILD) --output-on-failure -j $(JOBS) --timeout 600

test-unit: build
	bash scripts/run-ctest.sh $(BUILD) --output-on-failure -j $(JOBS) -L unit

test-fuzz: deps
	JOBS=$(JOBS) bash scripts/test-fuzz.sh

test-sanitize: deps
	JOBS=$(JOBS) bash scripts/test-sanitize.sh

bench:
	bash scripts/install-deps.sh --bench
	$(MAKE) build BUILD=$(BUILD)
	BUILD=$(BUILD) bash bench/run_cpu_bench.sh

# Triton's perf_analyzer through the KServe v2 protocol beside fuserank-bench (docs/kserve.md)
# alone; `make bench` runs it too. It fetches perf_analyzer from PyPI and, on Debian 12, a
# newer glibc runtime from Debian's archive to start it.
bench-kserve:
	bash scripts/install-deps.sh --bench
	$(MAKE) build BUILD=$(BUILD)
	BUILD=$(BUILD) bash bench/run_kserve_bench.sh

# fuserank against ONNX Runtime, PyTorch 2.x and fbgemm from PyPI (a venv under $(BUILD))
# alone; `make bench` runs it too (docs/benchmarks.md, "Peers from PyPI").
bench-peers:
	bash scripts/install-deps.sh --bench
	$(MAKE) build BUILD=$(BUILD)
	BUILD=$(BUILD) bash bench/run_peer_bench.sh

format-check:
	git ls-files '*.h' '*.cc' '*.cu' | xargs clang-format --dry-run -Werror

# Includes against the layers of scripts/layers.txt (docs/testing.md, "Layers").
check-layers:
	python3 scripts/check_layers.py

# What CI checks before it builds: formatting and layering.
lint: deps format-check check-layers

clean:
	rm -rf $(BUILD)
