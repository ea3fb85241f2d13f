#!/usr/bin/python3
"""Keeps the format's words spelled once: in include/bb/artifact.h (its macros) and the
vocabulary table behind it (src/ir/artifact.c).

A word of the format is
* every string an artifact.h macro spells that is a domain, type, key or reserved name
  (it holds '.', '@', '#' or '__'; short values such as "true" or "out" are ordinary words
  too, and stay free);
* every role name and role trait of the ROLES table in src/ir/artifact.c;
* "ai.onnx", and any string that starts with "ai.bytesandbrains" (a key or domain built
  by hand).
A C string literal that equals such a word, outside comments, in the library, its public
headers, bb.wasm's ABI, the bb tool, the examples or the benchmarks is an error: use the
macro (BB_DOMAIN_ONNX_ALIAS, BB_KEY_...) or the function (bb_domain_is_onnx,
bb_role_name, ...). Messages may mention a word inside a longer sentence. tests/ spell
the words out on purpose: they check the bytes of the format independently.

usage: check_vocabulary.py [REPO_ROOT]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
HOME = {"include/bb/artifact.h", "src/ir/artifact.c"}
SCANNED = ("src", "include", "wasm", "tools", "examples", "bench")
# Words that belong to another table, each with the reason it is spelled where it is.
ELSEWHERE = {
    ("src/value/value.c", "ai.bytesandbrains.value.Tensor"):
        "a value carrier's name: its hash is the kind's type on the wire, and value.c's carrier table is its one spelling",
}

DEFINE_RE = re.compile(r"^#define\s+(BB_\w+)\s+(.+?)\s*$", re.M)
TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\w+')
LITERAL_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
ROLE_RE = re.compile(r'\{(BB_ROLE_\w+), "(\w+)", "(\w+)"')


def macro_strings(header):
    """Each artifact.h macro whose value is a string (literals and other macros joined)."""
    defs = dict(DEFINE_RE.findall(header))

    def value(expr, depth=0):
        out = ""
        for tok in TOKEN_RE.findall(expr):
            if tok.startswith('"'):
                out += tok[1:-1]
            elif tok in defs and depth < 8:
                v = value(defs[tok], depth + 1)
                if v is None:
                    return None
                out += v
            else:
                return None
        return out

    return {name: value(expr) for name, expr in defs.items() if value(expr) is not None}


def vocabulary():
    words = {}
    for name, text in macro_strings((root / "include/bb/artifact.h").read_text(encoding="utf-8")).items():
        if re.search(r"[.@#]|__", text):
            words[text] = name
    table = (root / "src/ir/artifact.c").read_text(encoding="utf-8")
    roles = ROLE_RE.findall(table)
    if not roles:
        sys.exit("check_vocabulary: found no ROLES rows in src/ir/artifact.c")
    for role, name, trait in roles:
        words[name] = f"bb_role_name({role})"
        words[trait] = f"bb_role_trait({role})"
    return words


def blank_comments(text):
    """The text with comments blanked out, line numbers kept."""
    return COMMENT_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def main():
    words = vocabulary()
    if "ai.onnx" not in words:
        sys.exit("check_vocabulary: artifact.h no longer spells \"ai.onnx\" (BB_DOMAIN_ONNX_ALIAS)")
    problems = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.[ch]")):
            rel = path.relative_to(root).as_posix()
            if rel in HOME:
                continue
            text = blank_comments(path.read_text(encoding="utf-8", errors="replace"))
            for m in LITERAL_RE.finditer(text):
                s = m.group(1)
                if (rel, s) in ELSEWHERE:
                    continue
                if s in words or s.startswith("ai.bytesandbrains"):
                    line = text.count("\n", 0, m.start()) + 1
                    use = words.get(s, "a macro of include/bb/artifact.h")
                    problems.append(f'{rel}:{line}: "{s}" is a word of the format: use {use}')
    for p in problems:
        print(p)
    print(f"vocabulary: {len(words)} words, {len(problems)} spelled outside include/bb/artifact.h")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
