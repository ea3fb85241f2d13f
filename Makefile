# A thin front for the README's commands; the build itself is CMake (CMakeLists.txt).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all setup build wasm asan test demo clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j $(JOBS)

wasm: setup
	@bash scripts/build-wasm.sh

asan: setup
	@CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBB_SANITIZE=ON -DBB_FUZZ=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)

test: setup
	@bash scripts/test.sh

demo: setup
	@bash scripts/demo.sh

clean:
	rm -rf build build-asan build-wasm js/wasm js/dist
