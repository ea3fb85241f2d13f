#!/usr/bin/python3
"""Keeps the include graph pointing down the layers (docs/BUILDING.md, "Public and internal").

Rules, checked over every `#include "..."` line:
* src/<layer>/ may include headers of its own layer and of layers below it, public
  (`bb/x.h`) or internal (`<layer>/...`), never one above it.
* A public header (include/bb/*.h) includes only public headers of its layer or below.
* wasm/, tools/, examples/ and bench/ sit on top and use public headers, the interface of
  the reference programs (`programs/*.h`) and their own local headers; bench/ may also
  include the internal micro-kernel and engine headers it measures (BENCH_INTERNAL),
  fixtures shared with tests/ and the examples' data loaders (examples/common/).
* tests/ are white-box and may include anything.
An unknown folder or public header is an error too, so a new layer is placed on purpose.
* The files of src/ form no circle: a file and its header are one part (one stem,
  `engine.c` + `engine.h`) unless the header declares functions of other files (a
  folder's shared header, `grad/builder.h`, is a part of its own), and a part depends on
  another when it includes its header or one of its function bodies calls a function the
  other defines. A circle is reported with what ties it.

usage: check_layers.py [REPO_ROOT]"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import csource  # noqa: E402

# Bottom to top. A layer may include itself and anything earlier in this list.
LAYERS = ["util", "ir", "tensor", "cpu", "grad", "dsl", "compiler", "wire", "privacy", "value", "runtime", "roles",
          "components", "sim", "programs"]

# Each public header and the layer it belongs to.
PUBLIC = {
    "common.h": "util",
    "bytes.h": "util",
    "artifact.h": "ir",
    "ir.h": "ir",
    "tensor.h": "tensor",
    "cpu.h": "cpu",
    "grad.h": "grad",
    "graph.h": "dsl",
    "compiler.h": "compiler",
    "wire.h": "wire",
    "join_token.h": "wire",
    "privacy.h": "privacy",
    "value.h": "value",
    "runtime.h": "runtime",
    "roles.h": "roles",
    "dataset.h": "components",
    "onnx_model.h": "components",
    "sim.h": "sim",
    "bb.h": "programs",
}

# Internal headers bench/ may include: the micro-kernels and component engines it times.
BENCH_INTERNAL = re.compile(r"^(tensor/kernels/[\w.]+\.h|components/\w+/[\w.]+\.h)$")
TOP = ("wasm", "tools", "examples", "bench")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
rank = {name: i for i, name in enumerate(LAYERS)}
problems = []


def layer_of_include(inc):
    """The layer an include names, or None for a header that is not part of src/include."""
    if inc.startswith("bb/"):
        name = inc[3:]
        if name not in PUBLIC:
            return "?public"
        return PUBLIC[name]
    first = inc.split("/", 1)[0]
    if "/" in inc and (root / "src" / first).is_dir():
        return first if first in rank else "?layer"
    return None


def report(path, line, message):
    problems.append(f"{path.relative_to(root)}:{line}: {message}")


def includes(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in INCLUDE_RE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


for folder in sorted(p for p in (root / "src").iterdir() if p.is_dir()):
    if folder.name not in rank:
        problems.append(f"src/{folder.name}/: not a known layer (add it to LAYERS in {pathlib.Path(__file__).name})")
for name in sorted(p.name for p in (root / "include" / "bb").glob("*.h")):
    if name not in PUBLIC:
        problems.append(f"include/bb/{name}: not placed in a layer (add it to PUBLIC in {pathlib.Path(__file__).name})")

for path in sorted((root / "src").rglob("*.[ch]")):
    own = path.relative_to(root / "src").parts[0]
    if own not in rank:
        continue
    for line, inc in includes(path):
        layer = layer_of_include(inc)
        if layer is None:
            continue
        if layer.startswith("?"):
            report(path, line, f'"{inc}" is not a known layer or public header')
        elif rank[layer] > rank[own]:
            report(path, line, f'{own} includes "{inc}" of the {layer} layer above it')

for path in sorted((root / "include" / "bb").glob("*.h")):
    own = PUBLIC.get(path.name)
    for line, inc in includes(path):
        if not inc.startswith("bb/"):
            report(path, line, f'a public header includes the internal header "{inc}"')
            continue
        layer = layer_of_include(inc)
        if own and layer and not layer.startswith("?") and rank[layer] > rank[own]:
            report(path, line, f'public header of the {own} layer includes "{inc}" of the {layer} layer above it')

for top in TOP:
    for path in sorted((root / top).rglob("*.[ch]")):
        if "node_modules" in path.parts:
            continue
        for line, inc in includes(path):
            if inc.startswith("bb/") or inc.startswith("programs/"):
                continue
            if top == "bench" and BENCH_INTERNAL.match(inc):
                continue
            if layer_of_include(inc) is None and any((root / top).rglob(pathlib.PurePath(inc).name)):
                continue  # a header of its own top-level folder (cli.h, bb_wasm.h, digits.h)
            if top == "bench" and (root / "tests" / inc).is_file():
                continue  # a fixture shared with the tests (the large generated module)
            if top == "bench" and (root / "examples" / "common" / inc).is_file():
                continue  # the examples' data loaders (the digits a benchmark federates over)
            report(path, line, f'{top}/ includes the internal header "{inc}" (only public headers up here)')


CALL_RE = re.compile(r"\b(\w+)\s*\(")


def split_bodies(text, functions):
    """(the names followed by "(" inside function bodies, those outside any): the calls a
    file makes, and the functions a header declares. functions: csource.functions(text)."""
    lines = csource.code_only(text).split("\n")
    inside = set()
    for _, first, last, _ in functions:
        inside.update(range(first - 1, last))
    body = "\n".join(line for i, line in enumerate(lines) if i in inside)
    rest = "\n".join(line for i, line in enumerate(lines) if i not in inside)
    return set(CALL_RE.findall(body)), set(CALL_RE.findall(rest))


def source_circles():
    """The circles among src's files, each as a list of (part, next part, why).

    A .c file and the header of its name are one part (`engine.c` + `engine.h`), unless the
    header declares functions other files define: such a header (a folder's shared state,
    `grad/builder.h`) is a part of its own. A part depends on another when it includes its
    header or a function body of its calls a function the other defines."""
    base = root / "src"
    files = sorted(base.rglob("*.[ch]"))
    stem = lambda path: path.relative_to(base).with_suffix("").as_posix()  # noqa: E731
    texts = {path: path.read_text(encoding="utf-8", errors="replace") for path in files}
    functions = {path: csource.functions(texts[path]) for path in files}
    definers = {}  # a function defined outside a file (not static) -> the .c files defining it
    for path in files:
        if path.suffix == ".c":
            for name, _, _, static in functions[path]:
                if not static:
                    definers.setdefault(name, set()).add(stem(path))
    defined = {name: next(iter(where)) for name, where in definers.items() if len(where) == 1}

    def part_of(path):
        if path.suffix == ".h":
            declared = split_bodies(texts[path], functions[path])[1]
            if any(defined.get(name, stem(path)) != stem(path) for name in declared):
                return stem(path) + ".h"
        return stem(path)

    parts = {path: part_of(path) for path in files}
    edges = {}
    for path in files:
        me = parts[path]
        for _, inc in includes(path):
            target = base / inc
            if target in parts and parts[target] != me:
                edges.setdefault(me, {}).setdefault(parts[target], set()).add(f'#include "{inc}"')
        for name in split_bodies(texts[path], functions[path])[0]:
            if defined.get(name, me) != me:
                edges.setdefault(me, {}).setdefault(defined[name], set()).add(f"{name}()")
    circles, seen, on_path = [], set(), []

    def visit(part):
        on_path.append(part)
        for nxt in sorted(edges.get(part, {})):
            if nxt in on_path:
                loop = on_path[on_path.index(nxt):] + [nxt]
                circles.append([(a, b, ", ".join(sorted(edges[a][b])[:3])) for a, b in zip(loop, loop[1:])])
            elif nxt not in seen:
                visit(nxt)
        on_path.pop()
        seen.add(part)

    for part in sorted(edges):
        if part not in seen:
            visit(part)
    return circles


for circle in source_circles():
    ties = "; ".join(f"{a} -> {b} ({why})" for a, b, why in circle)
    problems.append(f"src: a circle of {len(circle)} parts: {ties}")

if problems:
    print("\n".join(problems))
    print(f"check_layers: {len(problems)} problem(s)")
    sys.exit(1)
print("check_layers: includes point down the layers, and the files of src/ form no circle")
