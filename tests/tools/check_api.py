#!/usr/bin/python3
"""Keeps the line between the public interface and the internals (docs/BUILDING.md,
"Public and internal").

Rules:
* Every function (and extern data object) a public header declares — include/bb/*.h,
  and the reference programs' interface src/programs/include/programs/*.h — starts with
  BB_API; static inline helpers need none.
* The public prefix bb_/BB_ belongs to the public interface: a name that a file under src/
  defines (function, static inline helper, type, struct/enum tag, enum constant, macro,
  object) and that no public header names takes the internal prefix bbi_/BBI_ (or a
  module prefix such as rt_, cc_).
* Given the built libraries, the symbols they export (global, default visibility) are
  exactly the BB_API names, and every other global symbol is hidden and has no bb_/BB_
  prefix.
* Every BB_API function is called (or its address taken) somewhere besides its own
  definition: in the library, bb.wasm's ABI, the bb tool, the examples, the benchmarks or
  the tests. A public function nothing uses is untested: test it or remove it.
* A bb_component_type is filled by field name (designated initialisers): 16 fields, most
  NULL for any one component, are unreadable and fragile by position.

usage: check_api.py [REPO_ROOT] [LIBRARY.a ...]"""
import pathlib
import re
import subprocess
import sys

args = sys.argv[1:]
root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parents[2])
libraries = [pathlib.Path(a) for a in args[1:]]
problems = []

PUBLIC_HEADERS = sorted((root / "include" / "bb").glob("*.h")) + \
    sorted((root / "src" / "programs" / "include" / "programs").glob("*.h"))


def blank(text):
    """Comments, strings, preprocessor lines and extern "C" braces as spaces, so that
    declarations can be found by their punctuation (offsets stay as they were)."""
    out = list(text)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    for m in re.finditer(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', text, re.S):
        wipe(m.start(), m.end())
    for m in re.finditer(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "".join(out), re.M):
        wipe(m.start(), m.end())
    for m in re.finditer(r"\bextern\s+\{", "".join(out)):
        wipe(m.start(), m.end())
    for m in re.finditer(r"^[ \t]*#[ \t]*ifdef[ \t]+__cplusplus[ \t]*\n[ \t]*\}[ \t]*\n[ \t]*#[ \t]*endif", text, re.M):
        wipe(m.start(), m.end())
    return "".join(out)


def declarations(text):
    """(offset, statement) of each function declaration and extern object at file scope."""
    s = blank(text)
    found, depth, paren, start = [], 0, 0, None
    for i, c in enumerate(s):
        if start is None and depth == 0 and not c.isspace() and c not in ";}":
            start = i
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = None  # a definition (a type, or a static inline function)
        elif c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == ";" and depth == 0 and paren == 0 and start is not None:
            begin, stmt = start, s[start:i + 1]
            start = None
            words = stmt.split()
            if not words or words[0] == "typedef" or "{" in stmt:
                continue
            head = stmt.split("(")[0]
            is_function = "(" in stmt and re.search(r"\b[A-Za-z_]\w*\s*$", head) is not None
            is_object = "extern" in words[:2]
            if is_function or is_object:
                found.append((begin, stmt))
    return found


def declared_name(stmt):
    head = stmt.split("(")[0] if "(" in stmt else stmt.rstrip(";").split("[")[0]
    names = re.findall(r"[A-Za-z_]\w*", head)
    return names[-1] if names else "?"


def code_only(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def defined_in(text):
    """The bb_/BB_ names a C file defines (not merely uses)."""
    code = code_only(text)
    p = r"((?:bb|BB)_\w+)"
    names = set(re.findall(r"^\s*#\s*define\s+" + p, code, re.M))
    names |= set(re.findall(r"\b(?:struct|enum|union)\s+" + p + r"\s*\{", code))
    names |= set(re.findall(r"\}\s*" + p + r"\s*;", code))
    names |= set(re.findall(r"\btypedef\b[^;{]*?\b" + p + r"\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?;", code))
    names |= set(re.findall(r"\btypedef\b[^;{]*?\(\s*\*\s*" + p + r"\s*\)", code))
    names |= set(re.findall(r"^[A-Za-z_][\w \t\*]*?\b" + p + r"\s*\(", code, re.M))
    for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", code):
        names |= set(re.findall(r"\b" + p + r"\s*(?:=|,|$)", body.strip() + ","))
    names |= set(re.findall(r"^(?:extern\s+|static\s+)?const\s+\w+\s+" + p + r"\s*(?:=|;|\[)", code, re.M))
    return names


# ---- BB_API on every public declaration ------------------------------------------------------

api = set()
public_names = set()
for path in PUBLIC_HEADERS:
    text = path.read_text(encoding="utf-8")
    public_names |= set(re.findall(r"\b(?:bb|BB)_\w+", code_only(text)))
    for offset, stmt in declarations(text):
        name = declared_name(stmt)
        line = text.count("\n", 0, offset) + 1
        if stmt.split()[0] != "BB_API":
            problems.append(f"{path.relative_to(root)}:{line}: {name} is declared without BB_API")
        else:
            api.add(name)

# ---- no internal name with the public prefix -----------------------------------------------------

for path in sorted((root / "src").rglob("*.[ch]")):
    if path in PUBLIC_HEADERS:
        continue
    for name in sorted(defined_in(path.read_text(encoding="utf-8", errors="replace")) - public_names):
        internal = ("bbi_" if name.startswith("bb_") else "BBI_") + name[3:]
        problems.append(f"{path.relative_to(root)}: {name} is internal: call it {internal} (or make it public)")

# ---- every public function is used ---------------------------------------------------------------

USERS = [p for folder in ("src", "wasm", "tools", "examples", "bench", "tests")
         for p in sorted((root / folder).rglob("*.[ch]")) if p not in PUBLIC_HEADERS]
uses = {}
for path in USERS:
    for name in re.findall(r"\b(bb_\w+)\b", code_only(path.read_text(encoding="utf-8", errors="replace"))):
        uses[name] = uses.get(name, 0) + 1
for name in sorted(api):
    if name.startswith("bb_") and uses.get(name, 0) < 2:  # its definition is one
        problems.append(f"{name} is public but nothing calls it (library, wasm, tools, examples, bench, tests): "
                        "test it or remove it")

# ---- component types by field name ---------------------------------------------------------------

for path in USERS:
    text = path.read_text(encoding="utf-8", errors="replace")
    code = re.sub(r"/\*.*?\*/|//[^\n]*", lambda c: re.sub(r"[^\n]", " ", c.group(0)), text, flags=re.S)
    for m in re.finditer(r"\bbb_component_type\s+\w+\s*=\s*\{(?!\s*\.)|\{\s*sizeof\s*\(\s*bb_component_type\s*\)\s*,",
                         code):
        line = code.count("\n", 0, m.start()) + 1
        problems.append(f"{path.relative_to(root)}:{line}: fill bb_component_type by field name "
                        "(.struct_size = ..., .type_name = ..., ...)")

# ---- what the built libraries export ---------------------------------------------------------------

SYMBOL_RE = re.compile(r"^\s*\d+:\s+\S+\s+\d+\s+(FUNC|OBJECT)\s+GLOBAL\s+(DEFAULT|HIDDEN|PROTECTED|INTERNAL)\s+"
                       r"(\d+|COM)\s+(\S+)$", re.M)
for lib in libraries:
    out = subprocess.run(["readelf", "-s", "--wide", str(lib)], capture_output=True, text=True, check=True).stdout
    for kind, visibility, _ndx, name in SYMBOL_RE.findall(out):
        if visibility == "DEFAULT" and name not in api:
            problems.append(f"{lib.name}: {name} is exported but no public header declares it with BB_API")
        elif visibility != "DEFAULT" and re.match(r"(bb|BB)_", name):
            problems.append(f"{lib.name}: {name} is hidden, so it is internal: call it bbi_{name[3:]}")

if problems:
    print("\n".join(problems))
    print(f"check_api: {len(problems)} problem(s)")
    sys.exit(1)
print(f"check_api: {len(api)} public declarations carry BB_API" +
      (f"; {', '.join(lib.name for lib in libraries)} export exactly those" if libraries else ""))
