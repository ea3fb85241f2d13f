#!/usr/bin/env bash
# The bb tool end to end: inspect, reencode, run (on a model made by onnx.helper, checked
# against numpy), ops, compile, vocab, and clear failures with non-zero exits on bad input.
# usage: test_cli.sh BB PYTHON SOURCE_DIR WRITE_FL_MODEL
set -uo pipefail
bb=$1 py=$2 src=$3 write_fl=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh"

"$py" "$src/tests/tools/make_cnn.py" "$tmp" || { echo "FAIL make_cnn.py"; exit 1; }

check "inspect names the graph and its ops" bash -c "'$bb' inspect '$tmp/cnn.onnx' | grep -q 'ai.onnx: Conv(1) Relu(1) MaxPool(1) Flatten(1) Gemm(1) Softmax(1)'"
check "inspect --json is JSON" bash -c "'$bb' inspect --json '$tmp/cnn.onnx' | '$py' -c 'import json,sys; d=json.load(sys.stdin); assert d[\"graph\"][\"nodes\"] == 6'"
check "reencode keeps a model onnx.checker accepts" bash -c "'$bb' reencode '$tmp/cnn.onnx' '$tmp/re.onnx' && '$py' -c 'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]))' '$tmp/re.onnx'"
check "run writes outputs" "$bb" run "$tmp/cnn.onnx" --input "x=$tmp/x.pb" --output-dir "$tmp/out" --repeat 3
check "run output matches numpy" "$py" -c '
import sys, numpy as np, onnx
from onnx import numpy_helper
got = numpy_helper.to_array(onnx.load_tensor(sys.argv[1]))
want = numpy_helper.to_array(onnx.load_tensor(sys.argv[2]))
assert got.shape == want.shape, (got.shape, want.shape)
assert np.allclose(got, want, rtol=1e-4, atol=1e-6), np.abs(got - want).max()
' "$tmp/out/probs.pb" "$tmp/expected.pb"
check "an input named by its TensorProto needs no NAME=" "$bb" run "$tmp/cnn.onnx" --input "$tmp/x.pb"
check "ops lists Conv" bash -c "'$bb' ops | grep -q '^  Conv '"
check "ops lists the grad domain's operators" bash -c "'$bb' ops | grep -A8 '^[0-9]* ai.bytesandbrains.grad operators' | grep -q '^  SumToShape '"

# a tiny model asking for a huge value: ConstantOfShape of [16384, 16384] floats (1 GiB)
# is refused before it is allocated, naming the node and the size
"$py" -c '
import sys, onnx
from onnx import helper, TensorProto
shape = helper.make_tensor("shape", TensorProto.INT64, [2], [16384, 16384])
g = helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")], "g", [],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
' "$tmp/fill.onnx"
fails_with "run refuses an op output over the cap" \
  "node fill (ConstantOfShape): output 0 (float \[16384, 16384\]) would take 1073741824 bytes, over the 268435456-byte cap" \
  "$bb" run "$tmp/fill.onnx" --output-dir "$tmp/fill"
# a tiny model whose outputs each stay under that cap but add up: twelve Expands of one
# float to 255 MB each (3 GB in all) stop at the node that takes the run past 1 GiB
"$py" -c '
import sys, onnx
from onnx import helper, TensorProto
n = int(sys.argv[2])
shape = helper.make_tensor("shape", TensorProto.INT64, [1], [n])
one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
nodes = [helper.make_node("Expand", ["one", "shape"], [f"y{i}"], name=f"grow{i}") for i in range(12)]
g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(12)],
                      [shape, one])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
' "$tmp/grow.onnx" 63750000
fails_with "run stops the outputs adding up past the total cap" \
  "node grow4: the run's values would hold 1275000000 bytes at once, over the cap of 1073741824" \
  "$bb" run "$tmp/grow.onnx"
"$py" -c '
import sys, onnx
from onnx import helper, TensorProto
m = onnx.load(sys.argv[1])
m.graph.initializer[0].int64_data[:] = [1000]
onnx.save(m, sys.argv[2])
' "$tmp/grow.onnx" "$tmp/grow_small.onnx"
fails_with "run holds a lower total cap" "node grow2: the run's values would hold 12000 bytes at once, over the cap of 10000" \
  "$bb" run "$tmp/grow_small.onnx" --max-total-bytes 10000
check "run stays within a total cap that fits" bash -c "'$bb' run '$tmp/grow_small.onnx' --max-total-bytes 48000 >/dev/null"
# an initializer whose dims multiply past 64 bits is not shown as 0 bytes
"$py" -c '
import sys, onnx
from onnx import helper, TensorProto
w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**40, 2**40])
g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
onnx.save(helper.make_model(g), sys.argv[1])
' "$tmp/huge.onnx"
check "inspect says an initializer size overflows" bash -c \
  "'$bb' inspect '$tmp/huge.onnx' | grep -q '1 initializers (a size that overflows 64 bits)'"
check "inspect --json gives null for it" bash -c \
  "'$bb' inspect --json '$tmp/huge.onnx' | '$py' -c 'import json,sys; assert json.load(sys.stdin)[\"graph\"][\"initializer_bytes\"] is None'"
check "inspect counts a large initializer exactly" bash -c \
  "'$py' -c 'import onnx,sys; from onnx import helper,TensorProto; w=TensorProto(name=\"w\",data_type=TensorProto.DOUBLE,dims=[2**31,2**20]); onnx.save(helper.make_model(helper.make_graph([helper.make_node(\"Identity\",[\"w\"],[\"y\"])],\"g\",[],[helper.make_tensor_value_info(\"y\",TensorProto.DOUBLE,None)],[w])),sys.argv[1])' '$tmp/big.onnx' && '$bb' inspect '$tmp/big.onnx' | grep -q '(18014398509481984 bytes)'"

"$write_fl" "$tmp/fl.onnx" || { echo "FAIL write_fl_model"; exit 1; }
fails_with "compile without storage types says how to fix it" "compile with permissive types" \
  "$bb" compile "$tmp/fl.onnx" --bind model=Mlp --bind aggregator=FedAvg -o "$tmp/fl.art"
check "compile with declared storage" "$bb" compile "$tmp/fl.onnx" --bind model=Mlp --bind aggregator=FedAvg \
  --storage Mlp.tensor=ai.bytesandbrains.tensor.f32 --storage FedAvg.element=ai.bytesandbrains.tensor.f32 -o "$tmp/fl.art"
check "compile --permissive" "$bb" compile "$tmp/fl.onnx" --bind model=Mlp --bind aggregator=FedAvg --permissive \
  -o "$tmp/fl2.art"
check "artifacts pass onnx.checker" "$py" -c 'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' "$tmp/fl.art"
check "inspect --json lists partitions, wire edges and bindings" "$py" -c '
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "inspect", "--json", sys.argv[2]], check=True, capture_output=True).stdout)
names = {p["name"]: p for p in d["partitions"]}
classes = sorted(p["peer_class"] for p in d["partitions"])
assert classes == ["@self", "clients", "server"], classes
for e in d["wire_edges"]:
    assert e["from"] in names and e["to"] in names, e
pairs = sorted((names[e["from"]]["peer_class"], names[e["to"]]["peer_class"]) for e in d["wire_edges"])
assert pairs == [("@self", "clients"), ("clients", "server")], pairs
slots = {(names[b["target"]]["peer_class"], b["slot"]): b for b in d["bindings"]}
assert slots[("server", "aggregator")]["type"] == "FedAvg" and slots[("clients", "model")]["role"] == "Model", slots
' "$bb" "$tmp/fl.art"
check "inspect --dot draws a graph" bash -c "'$bb' inspect --dot '$tmp/fl.art' | grep -q '^digraph'"
check "compiling twice gives the same bytes" bash -c "'$bb' compile '$tmp/fl.onnx' --bind model=Mlp --bind aggregator=FedAvg --permissive -o '$tmp/fl3.art' && cmp '$tmp/fl2.art' '$tmp/fl3.art'"
fails_with "compile names an unknown slot" "nosuch" "$bb" compile "$tmp/fl.onnx" --bind nosuch=X -o "$tmp/x.art"
fails_with "inspect --dot refuses a plain model" "not a compiled artifact" "$bb" inspect --dot "$tmp/cnn.onnx"

# A Backend op recorded outside the DSL (onnx.helper; node metadata is appended as the
# field newer ONNX releases define): CpuBackend refuses what the CPU backend cannot run,
# a backend type the tool knows nothing of accepts it.
"$py" - "$tmp/zeros.onnx" <<'PY' || { echo "FAIL writing zeros.onnx"; exit 1; }
import sys, onnx
from onnx import helper
def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)
def field(number, data):
    return varint(number << 3 | 2) + varint(len(data)) + data
def metadata(key, value):  # NodeProto.metadata_props = 9
    return field(9, field(1, key.encode()) + field(2, value.encode()))
node = onnx.NodeProto()
node.ParseFromString(helper.make_node("Zeros", [], ["y"]).SerializeToString()
                     + metadata("ai.bytesandbrains.required_trait", "BackendRuntime")
                     + metadata("ai.bytesandbrains.slot_id", "0") + metadata("ai.bytesandbrains.slot_name", "compute"))
fn = helper.make_function("ai.bytesandbrains.module", "Probe", [], ["y"], [node], [helper.make_opsetid("", 17)])
model = helper.make_model(helper.make_graph([], "Probe", [], []), functions=[fn],
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.bytesandbrains.module", 1)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
PY
fails_with "compile refuses an op CpuBackend does not run" 'UnknownOp: node `ai.onnx::Zeros#0` of `Probe` runs op Zeros (domain "") on Backend slot "compute", bound to CpuBackend' \
  "$bb" compile "$tmp/zeros.onnx" --bind compute=CpuBackend --permissive -o "$tmp/zeros-cpu.art"
check "compile accepts it on another backend" "$bb" compile "$tmp/zeros.onnx" --bind compute=OtherBackend --permissive \
  -o "$tmp/zeros-other.art"

# bb vocab: the table of bb/artifact.h
check "vocab lists the roles and the passport key" bash -c \
  "'$bb' vocab | grep -q '^  Backend  *BackendRuntime' && '$bb' vocab | grep -q '^  ai.bytesandbrains.compiled\$'"
check "vocab --json has every role and entry" "$py" -c '
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "vocab", "--json"], check=True, capture_output=True).stdout)
assert [r["name"] for r in d["roles"]] == ["Backend", "Model", "Index", "Aggregator", "Codec", "DataSource",
                                           "PeerSelector", "Protocol"], d["roles"]
assert d["roles"][0]["domain"] == "" and d["roles"][7]["domain"] is None, d["roles"]
keys = {e["name"]: e for e in d["entries"]}
assert keys["ai.bytesandbrains.compiled"]["kind"] == "model key", keys["ai.bytesandbrains.compiled"]
assert keys["ai.bytesandbrains.binding."]["prefix"] is True
assert all(e["meaning"] for e in d["entries"])
' "$bb"
fails_with "vocab refuses other arguments" "usage: bb vocab" "$bb" vocab --yaml

# The shipped examples (src/programs): each compiles with its default bindings and
# bb inspect shows its partitions. NAME:MODULES:PARTITIONS per artifact (modules beyond
# the first are written as FILE.<Module>.onnx).
check "compile --examples lists the thirteen examples" bash -c "[ \$('$bb' compile --examples | wc -l) -eq 13 ]"
for spec in quickstart:Quickstart:1 component_with_dependency:CountingApp:1 custom_index:CustomIndexApp:1 \
  multi_target_network:FedNetwork:2 federated_learning:ClientLogic,ServerLogic,ServerReduce:1 \
  single_node_federated_learning:FederatedRound:2 custom_compiler_pass:App:2 \
  polymorphic_types:AddReluDemo,StampDemo:1 federated_digits:FedDigits,FedBuffDigits:3 gossip_digits:GossipDigits:1 \
  hierarchical_digits:HierDigits:5 federated_cnn:FedCnn:3; do
  IFS=: read -r name modules parts <<<"$spec"
  check "compile --example $name" "$bb" compile --example "$name" -o "$tmp/ex-$name.onnx"
  IFS=, read -ra mods <<<"$modules"
  for mod in "${mods[@]}"; do
    if [ "${#mods[@]}" -eq 1 ]; then f="$tmp/ex-$name.onnx"; else f="$tmp/ex-$name.$mod.onnx"; fi
    check "inspect example $name ($mod) shows $parts partition(s)" bash -c \
      "'$bb' inspect '$f' | grep -q '^artifact: $parts partition(s)' && '$bb' inspect '$f' | grep -q '^partition $mod#'"
    check "example $name ($mod) passes onnx.checker" "$py" -c \
      'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' "$f"
  done
done
check "multi_target_network's sink partition is class sink_peers" bash -c \
  "'$bb' inspect '$tmp/ex-multi_target_network.onnx' | grep -q '^partition FedNetwork_sink_peers#.*class sink_peers'"
# bb inspect --wires: the artifacts compiled apart pair up; unrelated ones cannot talk
fl="$tmp/ex-federated_learning"
check "inspect --wires: ClientLogic and ServerReduce pair on ClientLogic.updated_params" bash -c \
  "'$bb' inspect --wires '$fl.ClientLogic.onnx' '$fl.ServerReduce.onnx' | grep -q '^  pairs      ClientLogic.updated_params '"
check "inspect --wires --json says ServerLogic and ClientLogic can talk" bash -c \
  "'$bb' inspect --wires --json '$fl.ServerLogic.onnx' '$fl.ClientLogic.onnx' | '$py' -c 'import json,sys; d=json.load(sys.stdin); assert d[\"can_talk\"] and d[\"wires\"][0][\"wire\"] == \"ServerLogic.server_params\"'"
fails_with "inspect --wires says when two artifacts cannot talk (exit 1)" "cannot talk: no wire pairs" \
  "$bb" inspect --wires "$tmp/ex-federated_digits.FedDigits.onnx" "$tmp/ex-gossip_digits.onnx"
fails_with "inspect --wires needs two artifacts" "usage" "$bb" inspect --wires "$fl.ClientLogic.onnx"
check "compile --example is deterministic" bash -c \
  "'$bb' compile --example custom_compiler_pass -o '$tmp/ex2.onnx' && cmp '$tmp/ex2.onnx' '$tmp/ex-custom_compiler_pass.onnx'"
fails_with "compile --example names an unknown example" "no example named nosuch" \
  "$bb" compile --example nosuch -o "$tmp/x.art"

head -c 100 "$tmp/cnn.onnx" >"$tmp/cut.onnx"
fails_with "inspect rejects a truncated model" "runs past the end" "$bb" inspect "$tmp/cut.onnx"
fails_with "run rejects a missing file" "No such file" "$bb" run "$tmp/none.onnx"
fails_with "run names a missing input" "graph input x was not given" "$bb" run "$tmp/cnn.onnx"
fails_with "run names an unknown input" "no input named y" "$bb" run "$tmp/cnn.onnx" --input "y=$tmp/x.pb"
fails_with "run rejects a wrong element type" "declares float, got int64" "$bb" run "$tmp/cnn.onnx" --input "x=$tmp/x_int.pb"
vector="$src/tests/fuzz/corpus/envelope-vector.bin"
check "wire decode prints the reference vector" "$py" -c '
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "wire", "decode", sys.argv[2]], check=True, capture_output=True).stdout)
assert d["dest_peer_addresses"] == ["/p2p/16uZAbWC1AJvL"] and d["src_peer_addresses"] == ["/p2p/16uZAbWC1AJvM"], d
assert d["correlation"] == {"kind": "REQUEST", "wire_req_id": 1} and d["remaining_deadline_ns"] == 100000000, d
f = d["fills"][0]
assert f["dest"] == "/site/17" and f["type_hash"] == "0x1d82330cc10a293d" and f["payload_bytes"] == 11, f
assert f["type_name"].endswith("BytesValue"), f
' "$bb" "$vector"
check "wire decode prints the schema 2 vector: a fill to wire ClientLogic.updated_params" "$py" -c '
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "wire", "decode", sys.argv[2]], check=True, capture_output=True).stdout)
f = d["fills"][0]
assert d["schema_version"] == 2 and f["dest"] == "/site/%d" % 0x43cff40e340c5278, d
assert f["type_name"] == "ai.bytesandbrains.value.Tensor" and f["payload_bytes"] == 24, f
' "$bb" "$src/tests/fuzz/corpus/envelope-vector-v2.bin"
head -c 40 "$vector" >"$tmp/cut.bin"
fails_with "wire decode names what is wrong" "length runs past the end" "$bb" wire decode "$tmp/cut.bin"
fails_with "unknown command" "unknown command" "$bb" frobnicate

echo "$failures failed"
[ "$failures" -eq 0 ]
