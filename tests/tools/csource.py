"""Reading C sources as the checks need them: comments and string or character literals
blanked out (line breaks kept, so line numbers stay true), and the functions a file
defines, with the lines they span."""
import re

_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text):
    """text with every comment and literal replaced by spaces (line breaks kept)."""
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


_NAME_BEFORE_PAREN = re.compile(r"(\w+)\s*\($")
# a preprocessor directive with its continuation lines (a macro's braces are no function)
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def functions(text):
    """(name, first line, last line, static) for each function defined at file scope."""
    code = _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code_only(text))
    found = []
    depth = 0
    decl_start = 0  # offset where the current file-scope declaration began
    body = None  # (name, first line, static) of the function whose body is open
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                head = code[decl_start:i]
                paren = head.find("(")
                if paren > 0 and "=" not in head[:paren] and not re.match(r"\s*(typedef|struct|enum|union)\b", head):
                    m = _NAME_BEFORE_PAREN.search(head[: paren + 1].rstrip())
                    first = code.count("\n", 0, decl_start + len(head) - len(head.lstrip())) + 1
                    if m:
                        body = (m.group(1), first, bool(re.match(r"\s*static\b", head)))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if body:
                    found.append((body[0], body[1], code.count("\n", 0, i) + 1, body[2]))
                    body = None
                decl_start = i + 1
        elif ch in ";" and depth == 0:
            decl_start = i + 1
        elif ch == "\n" and depth == 0 and code[decl_start:i].lstrip().startswith("#"):
            decl_start = i + 1  # a preprocessor line is no part of a declaration
    return found
