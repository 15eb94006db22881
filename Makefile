# make run   : install what is missing, build, run the engine on the default model
# make test  : install what is missing, build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)
MODEL ?= tests/models/qwen3_5_dense
PROMPT ?= The quick brown fox

.PHONY: all install build test run clean bench

all: build

install:
	@bash scripts/install.sh

build: install
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

run: build
	$(BUILD)/hypic run --model $(MODEL) --prompt "$(PROMPT)" --max-tokens 32

clean:
	rm -rf $(BUILD)
