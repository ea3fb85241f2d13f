#!/usr/bin/python3
"""Compiles and runs the C programs of docs/GUIDE.md as a reader would: each ```c block
that names its file on its first line (/* name.c — ... */), against build/libbb.a.

  run_model.c       run on a model of one float [1, 4] input (a Relu, made with onnx)
  record_module.c   prints the recorded Module's summary

Usage: check_guide_c.py REPO_ROOT LIBBB.a CC [LINK_FLAGS]
"""
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

EXPECT = {
    'run_model.c': (lambda d: [os.path.join(d, 'relu.onnx')], r'^y: float32\[1,4\]'),
    'record_module.c': (lambda d: [], r'ClientLogic'),
}


def main(root, lib, cc, link_flags=''):
    guide = open(os.path.join(root, 'docs', 'GUIDE.md')).read()
    blocks = re.findall(r'^```c\n(.*?)^```$', guide, re.S | re.M)
    named = {}
    for code in blocks:
        m = re.match(r'/\* ([\w.-]+\.c)\b', code)
        if not m:
            sys.exit(f'GUIDE.md: a C block does not name its file on its first line: {code[:60]!r}')
        named[m.group(1)] = code
    if set(named) != set(EXPECT):
        sys.exit(f'GUIDE.md: C programs {sorted(named)}, this check runs {sorted(EXPECT)}')
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 4])
        y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4])
        graph = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'relu', [x], [y])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), os.path.join(d, 'relu.onnx'))
        for name, code in named.items():
            src = os.path.join(d, name)
            exe = src[:-2]
            open(src, 'w').write(code)
            built = subprocess.run([cc, '-std=c11', '-O1', '-I', os.path.join(root, 'include'), src, lib,
                                    '-lprotobuf-c', '-lsodium', '-lm', *link_flags.split(), '-o', exe], capture_output=True, text=True)
            if built.returncode:
                print(f'FAIL {name} does not compile:\n{built.stderr}')
                failed += 1
                continue
            args, pattern = EXPECT[name]
            ran = subprocess.run([exe, *args(d)], capture_output=True, text=True)
            if ran.returncode or not re.search(pattern, ran.stdout, re.M):
                print(f'FAIL {name} exited {ran.returncode}, printed:\n{ran.stdout}{ran.stderr}')
                failed += 1
            else:
                print(f'ok   {name}: {ran.stdout.splitlines()[0]}')
    print(f'guide_c: {len(named) - failed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:5]))
