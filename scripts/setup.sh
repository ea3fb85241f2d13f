#!/usr/bin/env bash
# Installs everything the build and the tests need, from Debian's archive and npm.
# Idempotent: when everything is present it only checks, and returns in about a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

APT_PACKAGES=(
  # lld-14 (wasm-ld) and binaryen (wasm-opt), which emscripten brings, also link bb-mt.wasm
  build-essential cmake pkg-config clang libclang-rt-14-dev
  emscripten lld-14 binaryen protobuf-c-compiler libprotobuf-c-dev libsodium-dev
  # bb-relaxed.wasm's kernels: Emscripten's clang-14 has no relaxed SIMD, clang-19 has
  # (emcc then also runs llvm-19's llvm-objcopy-19 and llvm-nm-19)
  clang-19 lld-19 llvm-19
  libonnx-dev libonnx-testdata python3-onnx python3-numpy python3-scipy python3-sklearn python3-torch python3-torchvision
  zlib1g-dev
  wabt chromium
  iproute2 util-linux openssl
  # the end-to-end runs on real networks and other engines (scripts/e2e*.sh): TURN, NAT
  # routers, a test CA in an NSS database, Firefox, WebKitGTK under a virtual display,
  # Redis for several signalling processes
  coturn nftables iputils-ping libnss3-tools firefox-esr webkit2gtk-driver xvfb xauth redis-server
)

say() { printf 'setup: %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else
    say "need root to run: $*"
    say "re-run as root (or install sudo), or install these Debian packages yourself: ${missing[*]:-protobuf-c sources}"
    exit 1
  fi
}

if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Node.js 20+ with npm comes with the machine image (Debian's own nodejs is too old for the
# pinned tools); check it rather than fight the image's packages.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  say "Node.js 20 or newer with npm is required (node and npm on PATH)"; exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then say "Node.js $node_major found; 20 or newer is required"; exit 1; fi

# Debian's source packages need a deb-src entry, which a fresh machine lacks.
ensure_deb_src() {
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null \
     && ! grep -qs '^deb-src' /etc/apt/sources.list 2>/dev/null; then
    as_root sh -c "sed 's/^Types: deb\$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      > /etc/apt/sources.list.d/debian-src.sources"
    as_root apt-get update -q
  fi
}

# protobuf-c runtime sources for the WebAssembly build: no binary package ships protobuf-c.c,
# so take them from Debian's source package (same version as libprotobuf-c-dev).
pbc="$root/third_party/protobuf-c"
if [ ! -f "$pbc/protobuf-c/protobuf-c.c" ]; then
  say "fetching the protobuf-c runtime sources (Debian source package) into third_party/"
  ensure_deb_src
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get source --download-only -o APT::Sandbox::User=root protobuf-c >/dev/null)
  mkdir -p "$pbc"
  tar --no-same-owner -xzf "$tmp"/protobuf-c_*.orig.tar.gz -C "$pbc" --strip-components=1 \
      --wildcards '*/protobuf-c/protobuf-c.[ch]' '*/LICENSE'
  rm -rf "$tmp"
fi

# libsodium sources for the WebAssembly build: the source package of the libsodium-dev
# that native builds link, with Debian's patches applied, reduced to the parts
# CMakeLists.txt compiles and the licence. Ed25519 (join tokens, the keys of secure
# aggregation), X25519, ChaCha20, ChaCha20-Poly1305, Poly1305, BLAKE2b and its key
# derivation (secure aggregation, bb/privacy.h). A copy that lacks one of them is fetched
# again.
sodium="$root/third_party/libsodium"
SODIUM_PARTS=(include crypto_sign/ed25519 crypto_core/ed25519 crypto_hash/sha512 crypto_verify sodium
  crypto_scalarmult/curve25519 crypto_stream/chacha20 crypto_aead/chacha20poly1305 crypto_onetimeauth/poly1305
  crypto_generichash/blake2b crypto_kdf/blake2b)
sodium_complete() {
  for part in "${SODIUM_PARTS[@]}"; do [ -d "$sodium/src/libsodium/$part" ] || return 1; done
  [ -f "$sodium/src/libsodium/crypto_sign/ed25519/ref10/open.c" ] && [ -f "$sodium/LICENSE" ]
}
if ! sodium_complete; then
  say "fetching the libsodium sources (Debian source package) into third_party/"
  ensure_deb_src
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get source --download-only -o APT::Sandbox::User=root libsodium >/dev/null \
     && dpkg-source --no-check -x libsodium_*.dsc src >/dev/null)
  rm -rf "$sodium"
  mkdir -p "$sodium/src/libsodium"
  for part in "${SODIUM_PARTS[@]}"; do
    mkdir -p "$sodium/src/libsodium/$(dirname "$part")"
    cp -R "$tmp/src/src/libsodium/$part" "$sodium/src/libsodium/$part"
  done
  cp "$tmp/src/LICENSE" "$sodium/LICENSE"
  rm -rf "$tmp"
fi

# npm packages of the JavaScript package (pinned by its lockfile).
if [ -f js/package-lock.json ]; then
  stamp=js/node_modules/.bb-lock-stamp
  if [ ! -f "$stamp" ] || ! cmp -s js/package-lock.json "$stamp"; then
    say "installing npm packages of js/ (npm ci)"
    (cd js && npm ci --no-audit --no-fund --loglevel=error)
    cp js/package-lock.json "$stamp"
  fi
fi

# npm packages of web-demo (its own lockfile; it uses js/ as any app uses the package).
if [ -f web-demo/package-lock.json ]; then
  stamp=web-demo/node_modules/.bb-lock-stamp
  if [ ! -f "$stamp" ] || ! cmp -s web-demo/package-lock.json "$stamp"; then
    say "installing npm packages of web-demo/ (npm ci)"
    (cd web-demo && npm ci --no-audit --no-fund --loglevel=error)
    cp web-demo/package-lock.json "$stamp"
  fi
fi
say "ok"
