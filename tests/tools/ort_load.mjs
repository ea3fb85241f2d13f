// onnxruntime-node as the tests' scripts load it: the js/ package's dev dependency, or a
// clear exit when it is not installed.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export function loadOrt(script) {
  const jsPackage = fileURLToPath(new URL('../../js/package.json', import.meta.url));
  try {
    return createRequire(jsPackage)('onnxruntime-node');
  } catch (error) {
    console.error(`${script}: onnxruntime-node is not installed in js/node_modules (run make setup): ${error.message}`);
    process.exit(1);
  }
}
