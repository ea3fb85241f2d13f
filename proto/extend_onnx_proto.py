#!/usr/bin/env python3
"""Writes a copy of the system's onnx.proto with the fields newer ONNX releases added.

Debian 12 ships ONNX 1.12 (IR version 8). bytesandbrains stores its conventions in fields
that ONNX added later (IR version 9/10): metadata_props on nodes, functions, graphs, value
infos and tensors; value_info, overload and attribute_proto on functions; overload on nodes.
Each is added here with the field number upstream ONNX gave it, so the generated codec
reads and writes exactly what newer ONNX tools read and write, and older tools keep the
fields as unknown fields. A field whose number the input already declares is left alone,
so a newer onnx.proto passes through unchanged.

usage: extend_onnx_proto.py INPUT OUTPUT
"""
import re
import sys

ADDITIONS = {
    "NodeProto": [
        (8, "optional string overload = 8;"),
        (9, "repeated StringStringEntryProto metadata_props = 9;"),
    ],
    "FunctionProto": [
        (11, "repeated AttributeProto attribute_proto = 11;"),
        (12, "repeated ValueInfoProto value_info = 12;"),
        (13, "optional string overload = 13;"),
        (14, "repeated StringStringEntryProto metadata_props = 14;"),
    ],
    "GraphProto": [(16, "repeated StringStringEntryProto metadata_props = 16;")],
    "ValueInfoProto": [(4, "repeated StringStringEntryProto metadata_props = 4;")],
    "TensorProto": [(16, "repeated StringStringEntryProto metadata_props = 16;")],
}


def message_span(lines, name):
    start = next((i for i, l in enumerate(lines) if re.match(r"message %s\s*\{" % name, l)), None)
    if start is None:
        sys.exit("extend_onnx_proto: message %s not found in the input" % name)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
    return start, end


def declared_numbers(body):
    numbers = set()
    for line in body:
        code = line.split("//", 1)[0]
        m = re.search(r"=\s*(\d+)\s*[;\[]", code)
        if m and code.startswith("  ") and not code.startswith("   "):
            numbers.add(int(m.group(1)))
        m = re.match(r"\s*reserved\s+([\d,\s]+);", code)
        if m:
            numbers.update(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
    return numbers


OPAQUE_MESSAGE = [
    "  message Opaque {  // added by bytesandbrains (ONNX-ML field)",
    "    optional string domain = 1;",
    "    optional string name = 2;",
    "  }",
]


def add_opaque_type(lines):
    start, end = message_span(lines, "TypeProto")
    body = lines[start + 1:end]
    if any(re.search(r"\bopaque_type\s*=\s*7\b", l) for l in body):
        return
    oneof = next(i for i in range(start, end) if re.match(r"\s*oneof value\s*\{", lines[i]))
    close = next(i for i in range(oneof, end) if re.match(r"\s*\}", lines[i]))
    lines[close:close] = ["    Opaque opaque_type = 7;  // added by bytesandbrains (ONNX-ML field)"]
    lines[start + 1:start + 1] = OPAQUE_MESSAGE


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    for name, fields in ADDITIONS.items():
        start, end = message_span(lines, name)
        have = declared_numbers(lines[start + 1:end])
        new = ["  " + decl + "  // added by bytesandbrains (upstream ONNX field)"
               for number, decl in fields if number not in have]
        lines[end:end] = new
    add_opaque_type(lines)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
