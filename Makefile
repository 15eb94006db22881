# make run   : install what is missing, build, serve the default model (OpenAI-compatible HTTP
#              on 127.0.0.1:$(PORT)); Ctrl-C stops it. MODEL=DIR|FILE.gguf serves another,
#              ARGS="--dtype f32 ..." passes more flags to hypic serve
# make test  : install what is missing, build, run every test
# make build-arm64 : cross-build for aarch64 Linux (build-arm64/; Debian's cross compiler and
#              :arm64 packages, installed by scripts/install.sh --arm64)
# make test-arm64  : that build's tests under qemu-aarch64, one emulated CPU per ARM ISA tier
#              (tests/scripts/arm64_suite.sh; needs `make build` for the comparisons)
BUILD ?= build
BUILD_ARM64 ?= build-arm64
JOBS ?= $(shell nproc)
# The embedded default: hypic-tiny (models/hypic-tiny, trained by tools/tiny/run.sh); the tiny
# random test checkpoint stands in if that directory is absent.
MODEL ?= $(if $(wildcard models/hypic-tiny/config.json),models/hypic-tiny,tests/models/qwen3_5_dense)
PORT ?= 8080
ARGS ?=

.PHONY: all install build test run clean bench build-arm64 test-arm64

all: build

install:
	@bash scripts/install.sh

build: install
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null
	@# what was compiled and any warning; not the ~100 "Built target" lines of an up-to-date tree
	@bash -c 'cmake --build $(BUILD) -j $(JOBS) 2>&1 | { grep -v -E "^\[ *[0-9]+%\] Built target |^g?make\[[0-9]+\]: (Entering|Leaving) directory" || true; }; \
	  exit $${PIPESTATUS[0]}'

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

build-arm64:
	@bash scripts/install.sh --arm64
	@cmake -S . -B $(BUILD_ARM64) -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake > /dev/null
	@bash -c 'cmake --build $(BUILD_ARM64) -j $(JOBS) --target hypic test_core test_kernels test_model test_engine 2>&1 | \
	  { grep -v -E "^\[ *[0-9]+%\] Built target |^g?make\[[0-9]+\]: (Entering|Leaving) directory" || true; }; exit $${PIPESTATUS[0]}'

test-arm64: build-arm64 build
	@bash tests/scripts/arm64_suite.sh $(BUILD_ARM64)

run: build
	$(BUILD)/hypic serve --model $(MODEL) --port $(PORT) $(ARGS)

clean:
	rm -rf $(BUILD)
