#!/usr/bin/python3
"""Keeps docs/COMPONENTS.md honest: every config key a shipped component accepts (each
`...KEYS[] = {...}` list in src/components/**/*.c) must appear in the doc as `key`; every key a
section's key table lists must be accepted by a KEYS list of the source file the section
names first (a key the code dropped must leave the doc); and every component type name
(`const bb_component_type BB_X = {..., .type_name = "Name", ...}`) must have a `## ` heading
that names it.

usage: check_components_doc.py [REPO_ROOT]   (default: two levels above this file)"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
doc_path = root / "docs" / "COMPONENTS.md"
doc = doc_path.read_text(encoding="utf-8")
headings = [line for line in doc.splitlines() if line.startswith("## ")]

KEYS_RE = re.compile(r"\b\w*KEYS\s*\[\s*\]\s*=\s*\{(.*?)\}", re.S)
TYPE_RE = re.compile(r"const\s+bb_component_type\s+\w+\s*=\s*\{[^}]*?\.type_name\s*=\s*\"([^\"]+)\"", re.S)

missing, keys, types, keys_of_file = [], set(), set(), {}
for src in sorted((root / "src" / "components").rglob("*.c")):
    text = src.read_text(encoding="utf-8", errors="replace")
    rel = src.relative_to(root)
    for m in KEYS_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for key in re.findall(r"\"([^\"]*)\"", m.group(1)):
            keys.add(key)
            keys_of_file.setdefault(rel.as_posix(), set()).add(key)
            if f"`{key}`" not in doc:
                missing.append(f"{rel}:{line}: config key `{key}` is not in {doc_path.name}")
    for m in TYPE_RE.finditer(text):
        name = m.group(1)
        types.add(name)
        if not any(re.search(rf"\b{re.escape(name)}\b", h) for h in headings):
            line = text.count("\n", 0, m.start()) + 1
            missing.append(f"{rel}:{line}: component type `{name}` has no `## ` heading in {doc_path.name}")

# Each `## ` section: the first `src/...c` it names, and the rows of its key tables.
SECTION_SRC_RE = re.compile(r"`(src/components/[^`]+\.c)`")
ROW_KEY_RE = re.compile(r"^\| `([^`]+)` \|")
sections = re.split(r"^(?=## )", doc, flags=re.M)
for section in sections:
    title, src = section.splitlines()[0], SECTION_SRC_RE.search(section)
    if not src:
        continue
    accepted, in_key_table = keys_of_file.get(src.group(1), set()), False
    for row in section.splitlines():
        if row.startswith("| key |"):
            in_key_table = True
        elif not row.startswith("|"):
            in_key_table = False
        elif in_key_table and (m := ROW_KEY_RE.match(row)) and m.group(1) not in accepted:
            missing.append(f"{doc_path.name}: `{title}` lists key `{m.group(1)}`, which {src.group(1)} does not accept")

if not keys or not types:
    missing.append(f"found {len(keys)} config keys and {len(types)} component types under src/components: the patterns no longer match the sources")
for problem in missing:
    print(problem, file=sys.stderr)
print(f"{len(keys)} config keys, {len(types)} component types checked against {doc_path}: "
      f"{'FAIL' if missing else 'ok'}")
sys.exit(1 if missing else 0)
