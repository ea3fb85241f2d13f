#!/usr/bin/env bash
# Builds everything and runs every test suite:
#   1. native Release build: C tests (ctest)
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (clang): C tests and fuzz targets
#   3. WebAssembly build: bb.wasm and bb-relaxed.wasm, and the C tests again under Node
#      (test_kernels_relaxed under node --experimental-wasm-relaxed-simd)
#   4. the npm package: type check and Vitest (including wasm vs native byte identity)
#   5. web-demo: type check, Vite build and unit tests
#   6. end to end: Chromium pages and a Node peer over WebRTC (scripts/e2e.sh), then
#      web-demo in Chromium at desktop and phone sizes (scripts/e2e.sh --web-demo)
# and ends with one line CI reads: "N passed, M failed". Above it, after the table of
# suites, every failed check is named with the log that holds its details (at most 20
# lines: CI shows only the output's tail). The three C builds treat the project's compiler
# warnings as errors (-DBB_WERROR=ON).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
log_dir=${BB_TEST_LOG_DIR:-$root/build/test-logs}
mkdir -p "$log_dir"

total_pass=0
total_fail=0
suite_lines=()
failure_lines=()

step() { printf '\n==> %s\n' "$*"; }

# The failed checks a log names, one a line: the e2e and web-demo checks (`FAIL name — detail`,
# after the `######## scenario` header scripts/e2e.sh prints), a scenario without its closing
# line, Vitest's tests (`vitest: FAIL file > test`, scripts/run-vitest.mjs) and ctest's list
# after "The following tests FAILED:". arg: log
failed_in_log() {
  awk '
    /^######## / { scenario = $2 ": "; next }
    /^The following tests FAILED:/ { ctest = 1; next }
    ctest && /^[[:space:]]+[0-9]+ - / { sub(/^[[:space:]]+/, ""); print; next }
    { ctest = 0 }
    /^FAIL / || /^vitest: FAIL / || /^run-vitest: / || /^e2e-nat: / || /^e2e: (scenario|no scenario|needs root|.* is missing)/ { print scenario $0 }
  ' "$1"
}

# Adds a suite's counts to the totals; a suite with failures notes them for the closing
# list, named from its log when it has one. args: name passed failed [log]
record() {
  total_pass=$((total_pass + $2))
  total_fail=$((total_fail + $3))
  suite_lines+=("$(printf '%-28s %4d passed, %d failed' "$1" "$2" "$3")")
  [ "$3" -gt 0 ] || return 0
  local log=${4:-} named=()
  if [ -n "$log" ] && [ -f "$log" ]; then
    mapfile -t named < <(failed_in_log "$log")
    failure_lines+=("$1 (details: ${log#"$root"/})")
  else
    failure_lines+=("$1")
  fi
  # a log that names no check (a build's, or a run cut short): its first error line
  if [ ${#named[@]} -eq 0 ] && [ -n "$log" ] && [ -f "$log" ]; then
    mapfile -t named < <(grep -m 1 -iE 'error|fail' "$log")
  fi
  [ ${#named[@]} -gt 0 ] || named=("(no failed check named: see the output above)")
  local l
  for l in "${named[@]}"; do
    [ ${#l} -le 150 ] || l="${l:0:147}..."
    failure_lines+=("    $l")
  done
}

# A build or set-up step that fails counts as one failed test of that suite.
build_or_fail() {
  local name=$1
  shift
  if ! "$@" >"$log_dir/$name.build.log" 2>&1; then
    tail -n 40 "$log_dir/$name.build.log"
    echo "test: building $name failed (log: $log_dir/$name.build.log)"
    record "$name" 0 1 "$log_dir/$name.build.log"
    return 1
  fi
}

# Records a suite from its log's last "PREFIX: N passed, M failed" line (a missing line
# counts as one failure). args: name prefix log
record_summary() {
  local line
  line=$(grep -E "^$2: [0-9]+ passed, [0-9]+ failed" "$3" | tail -n 1)
  if [ -z "$line" ]; then
    echo "test: $1 printed no summary line"
    record "$1" 0 1 "$3"
    return
  fi
  record "$1" "$(sed -E "s/^$2: ([0-9]+) passed.*/\1/" <<<"$line")" "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")" "$3"
}

# Runs ctest in a build tree, one test per core, and records its counts. Tests that cannot
# share the machine say so in tests/CMakeLists.txt (RESOURCE_LOCK, RUN_SERIAL); the longest
# carry a COST there, so a clean tree starts them first.
run_ctest() {
  local name=$1 dir=$2
  shift 2
  local out="$log_dir/$name.ctest.log"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "$@") 2>&1 | tee "$out" | grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|Errors while' || true
  local line passed failed totaln
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)
  if [ -z "$line" ]; then
    echo "test: ctest in $dir printed no summary"
    record "$name" 0 1 "$out"
    return
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  totaln=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
  passed=$((totaln - failed))
  record "$name" "$passed" "$failed" "$out"
}

step "native build (Release)"
if build_or_fail native bash -c "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBB_WERROR=ON && cmake --build build -j $jobs"; then
  step "C tests, native"
  run_ctest "C tests (native)" build
  # the README's first command, on the same build (about 10 s)
  step "make demo"
  if bash scripts/demo.sh >"$log_dir/demo.log" 2>&1; then
    record "make demo" 1 0
  else
    tail -n 30 "$log_dir/demo.log"
    echo "test: make demo failed (log: $log_dir/demo.log)"
    record "make demo" 0 1 "$log_dir/demo.log"
  fi
fi

step "sanitizer build (clang, ASan + UBSan, fuzz targets)"
if build_or_fail asan bash -c "CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBB_SANITIZE=ON -DBB_FUZZ=ON -DBB_WERROR=ON && cmake --build build-asan -j $jobs"; then
  step "C tests and fuzzing under ASan + UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest "C tests (ASan+UBSan)" build-asan
fi

step "WebAssembly build"
if build_or_fail wasm bash scripts/build-wasm.sh -DBB_WERROR=ON; then
  step "C tests under Node (wasm)"
  run_ctest "C tests (wasm)" build-wasm
fi

step "npm package: type check and Vitest"
if [ -f js/package.json ]; then
  if build_or_fail js-build bash -c "cd js && npm run --silent build"; then
    out="$log_dir/vitest.log"
    # npm test without its own npm run build: dist/ was built just above
    (cd js && npm run --silent typecheck && BB_NATIVE_BB="$root/build/bb" node scripts/run-vitest.mjs) 2>&1 |
      tee "$out" | tail -n 30
    record_summary "Vitest (js)" vitest "$out"
  fi
fi

step "web-demo: type check, build, unit tests"
if [ -f web-demo/package.json ] && [ -f js/dist/index.js ] && [ -f js/wasm/bb.wasm ]; then
  if build_or_fail web-demo-build bash -c "cd web-demo && npm run --silent build"; then
    out="$log_dir/web-demo-vitest.log"
    (cd web-demo && npm test --silent) 2>&1 | tee "$out" | tail -n 15
    record_summary "Vitest (web-demo)" vitest "$out"
  fi
else
  echo "test: no web-demo/package.json, js/dist or js/wasm/bb.wasm"
  record "Vitest (web-demo)" 0 1
fi

step "end to end: Chromium and Node peers over WebRTC (private network namespace)"
if [ -f js/dist/index.js ] && [ -f js/wasm/bb.wasm ]; then
  out="$log_dir/e2e.log"
  bash scripts/e2e.sh 2>&1 | tee "$out" | tail -n 40
  record_summary "End to end (browsers)" e2e "$out"
else
  echo "test: no js/dist or js/wasm/bb.wasm to run end to end with"
  record "End to end (browsers)" 0 1
fi

step "web-demo in Chromium: desktop and phone, in-page and live federations (private network namespace)"
if [ -f web-demo/dist/index.html ]; then
  out="$log_dir/web-demo-e2e.log"
  BB_TEST_LOG_DIR="$log_dir" bash scripts/e2e.sh --web-demo 2>&1 | tee "$out" | tail -n 30
  record_summary "web-demo (browsers)" web-demo "$out"
else
  echo "test: web-demo/dist is missing (its build failed above)"
  record "web-demo (browsers)" 0 1
fi

step "summary"
for l in "${suite_lines[@]}"; do echo "  $l"; done
if [ ${#failure_lines[@]} -gt 0 ]; then
  echo "failed:"
  for l in "${failure_lines[@]:0:20}"; do echo "  $l"; done
  [ ${#failure_lines[@]} -le 20 ] || echo "  ... and $((${#failure_lines[@]} - 20)) more lines (the logs above)"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
