/**
 * What every template's plan does the same way: making its compiler, compiling its Module,
 * handing an install's peer id, seed and join policy to the node, and giving it its held-out set.
 */
import type { Bb } from '../engine/bb.js';
import { Compiler } from '../node/compiler.js';
import type { Dataset } from '../train/dataset.js';
import type { Module } from '../dsl/module.js';
import type { NodeAdmission, NodeOptions } from '../node/node.js';
import { tensorValue, type Value } from '../node/values.js';
import type { Signer } from '../identity/identity.js';

/** An install's own identity: its peer id, its seed, the room's join policy, what signs for it (each optional). */
export interface InstallIdentity {
  readonly self?: string;
  readonly seed?: bigint | number;
  readonly admission?: NodeAdmission;
  /**
   * Signs for the peer id (an Identity; its peerId is then the default `self`): a client of a
   * `secure` federation signs its SecAgg+ keys with it, and cannot take part without it.
   */
  readonly signer?: Signer;
}

/** The node options an install's identity sets: only the ones it gives. */
export function identityOptions(options: InstallIdentity): Pick<NodeOptions, 'self' | 'seed' | 'admission' | 'signer'> {
  return {
    ...(options.self === undefined ? {} : { self: options.self }),
    ...(options.signer === undefined ? {} : { signer: options.signer }),
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    ...(options.admission === undefined ? {} : { admission: options.admission }),
  };
}

/** Records `module` and compiles it with `compiler`, which is freed: the artifact every peer installs. */
export function compileWith(bb: Bb, compiler: Compiler, module: Module): Uint8Array {
  try {
    return compiler.compile(module.build(bb));
  } finally {
    compiler.free();
  }
}

/** A new Compiler with the bindings `bind` makes; freed when one of them is refused. */
export function compilerWith(bb: Bb, bind: (compiler: Compiler) => void): Compiler {
  const compiler = new Compiler(bb);
  try {
    bind(compiler);
    return compiler;
  } catch (error) {
    compiler.free();
    throw error;
  }
}

/** A held-out set as the Modules' `test_x` and `test_y` inputs. */
export function testInputs(test: Dataset): { test_x: Value; test_y: Value } {
  const x = test.features();
  const y = test.labels();
  return { test_x: tensorValue('float', x.data, x.dims), test_y: tensorValue('float', y.data, y.dims) };
}
