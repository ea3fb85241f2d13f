# A thin front for the README's commands; the build itself is CMake (CMakeLists.txt).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all setup build wasm asan test demo web-demo clean

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

# The live demo page (docs/WEB-DEMO.md): builds the package, bb.wasm when it is missing and
# the page, then serves them with the signalling server and a live federation, and prints
# the URL and the LAN URL for a phone. HTTPS (which phones need to join) when given a
# certificate: make web-demo TLS_CERT=cert.pem TLS_KEY=key.pem. More serve.mjs options in
# WEB_DEMO_ARGS (e.g. '--ice-server stun:... --quorum 2').
PORT ?= 8080
CLIENTS ?= 4
web-demo: setup
	@[ -f js/wasm/bb.wasm ] && [ -f js/wasm/bb-relaxed.wasm ] && [ -f js/wasm/bb-mt.wasm ] && [ -f js/wasm/bb-mt-relaxed.wasm ] || bash scripts/build-wasm.sh
	@cd js && npm run --silent build
	@cd web-demo && npm run --silent build
	@node web-demo/serve.mjs --port $(PORT) --clients $(CLIENTS) $(if $(TLS_CERT),--tls-cert $(TLS_CERT) --tls-key $(TLS_KEY)) $(WEB_DEMO_ARGS)

clean:
	rm -rf build build-asan build-wasm js/wasm js/dist web-demo/dist
