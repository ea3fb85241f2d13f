#!/usr/bin/python3
"""Fails when a function under a folder runs over a number of lines (from its first
signature line to its closing brace), naming each one: a function does one thing, and a
long one is several.

usage: check_function_length.py REPO_ROOT FOLDER MAX_LINES"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import csource  # noqa: E402

root, folder, limit = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
longest = []
for path in sorted((root / folder).rglob("*.c")):
    for name, first, last, _ in csource.functions(path.read_text(encoding="utf-8", errors="replace")):
        longest.append((last - first + 1, f"{path.relative_to(root)}:{first}: {name}"))
longest.sort(reverse=True)
over = [f"{where} is {lines} lines (at most {limit})" for lines, where in longest if lines > limit]
if not longest:
    print(f"check_function_length: no function found under {folder}")
    sys.exit(1)
if over:
    print("\n".join(over))
    print(f"check_function_length: {len(over)} function(s) over {limit} lines")
    sys.exit(1)
print(f"check_function_length: {len(longest)} functions under {folder}, the longest {longest[0][0]} lines "
      f"({longest[0][1]})")
