# Check helpers for the shell tests of the bb tool; source it, then call
# check / fails_with and finish with `[ "$failures" -eq 0 ]`.
failures=0
check() { # description, then a command that must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
fails_with() { # description, expected message fragment, command that must fail
  local what=$1 frag=$2
  shift 2
  local out
  if out=$("$@" 2>&1); then echo "FAIL $what (exit 0)"; failures=$((failures + 1)); return; fi
  if grep -q -- "$frag" <<<"$out"; then echo "ok   $what"; else
    echo "FAIL $what: message was: $out"; failures=$((failures + 1)); fi
}
