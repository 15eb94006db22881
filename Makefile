# make run   : install what is missing, build, serve the default model (OpenAI-compatible HTTP
#              on 127.0.0.1:$(PORT)); Ctrl-C stops it. MODEL=DIR|FILE.gguf serves another,
#              ARGS="--dtype f32 ..." passes more flags to hypic serve
# make test  : install what is missing, build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)
# The embedded default: hypic-tiny (models/hypic-tiny, trained by tools/tiny/run.sh); the tiny
# random test checkpoint stands in if that directory is absent.
MODEL ?= $(if $(wildcard models/hypic-tiny/config.json),models/hypic-tiny,tests/models/qwen3_5_dense)
PORT ?= 8080
ARGS ?=

.PHONY: all install build test run clean bench

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

run: build
	$(BUILD)/hypic serve --model $(MODEL) --port $(PORT) $(ARGS)

clean:
	rm -rf $(BUILD)
