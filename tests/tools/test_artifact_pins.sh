#!/usr/bin/env bash
# Every example's compiled artifact is pinned by its SHA-256 (tests/tools/artifacts.sha256):
# a change to the compiler, the DSL or an example that alters a single byte of an artifact
# fails here, so such changes are made on purpose and the pins updated with them
# (`bb compile --example NAME -o NAME.onnx` for each name of `bb compile --examples`).
# usage: test_artifact_pins.sh BB SOURCE_DIR
set -euo pipefail
bb=$1
pins=$2/tests/tools/artifacts.sha256
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
names=$("$bb" compile --examples | awk '{print $1}')
test -n "$names"
for name in $names; do
  "$bb" compile --example "$name" -o "$work/$name.onnx" >/dev/null
done
# every pinned file was written and nothing unpinned was
diff <(awk '{print $2}' "$pins" | sort) <(cd "$work" && ls *.onnx | sort)
(cd "$work" && sha256sum --check --quiet "$pins")
echo "artifact pins: $(wc -l <"$pins") artifacts identical"
