/**
 * Modules written in TypeScript: a name, a body that records the Module's ops, and
 * optionally a bootstrap and the sub-modules its callbacks call.
 *
 * ```ts
 * const Scale = module('Scale', (g) => {
 *   const x = g.input('x');
 *   g.output('y', g.backend('cpu').op('Mul', [x, x]));
 * });
 * const Root = module('Root', (g) => {
 *   const y = g.call(Scale, { x: g.input('x', TYPES.tensorF32) }).output('y');
 *   g.output('y', y);
 * }, { submodules: [Scale] });
 * const bytes = Root.build(bb);            // ONNX ModelProto bytes, for Compiler.compile
 * ```
 *
 * `build` runs the recorder of bb.wasm (the one C programs record with), so the bytes are
 * those of the same Module recorded in C, and a misuse fails the build with the
 * recorder's message. An exception a callback throws ends the recording too; `build`
 * rethrows it.
 */
import type { Bb } from '../engine/bb.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { Graph, type BuildContext } from './graph.js';

/** A callback that records a Module's body or bootstrap. */
export type Recording = (g: Graph) => void;

export interface ModuleOptions {
  /** Records the bootstrap: what runs once on every peer before the body. */
  readonly bootstrap?: Recording;
  /** The modules the callbacks may call (g.call / g.callBootstrap). */
  readonly submodules?: readonly Module[];
}

export class Module {
  /** A C identifier without "__", not of the form v<digits> (the recorder checks it). */
  readonly name: string;
  readonly body: Recording;
  readonly bootstrap: Recording | undefined;
  readonly submodules: readonly Module[];

  constructor(name: string, body: Recording, options: ModuleOptions = {}) {
    this.name = name;
    this.body = body;
    this.bootstrap = options.bootstrap;
    this.submodules = options.submodules ?? [];
  }

  /** Records the Module: ONNX ModelProto bytes for `Compiler.compile`. */
  build(bb: Bb): Uint8Array {
    const build = new Build(bb);
    return build.run(this);
  }
}

/** `module('Name', (g) => { ... }, options)`: a new {@link Module}. */
export function module(name: string, body: Recording, options?: ModuleOptions): Module {
  return new Module(name, body, options);
}

const building = new WeakSet<Bb>();

/** One run of the recorder: the C modules made for it, the Graph whose callback runs. */
class Build implements BuildContext {
  readonly bb: Bb;
  readonly #handles = new Map<Module, number>();
  readonly #modules: Module[] = [];
  readonly #stack: Graph[] = [];
  #live = false;
  #thrown: { error: unknown } | undefined;

  constructor(bb: Bb) {
    this.bb = bb;
  }

  get live(): boolean {
    return this.#live;
  }

  get active(): Graph | undefined {
    return this.#stack[this.#stack.length - 1];
  }

  valueName(value: number): string {
    return this.bb.readCString(this.bb.checkPointer(this.bb.exports.bb_wasm_rec_value_name(value)));
  }

  valueType(value: number): string {
    return this.bb.readCString(this.bb.checkPointer(this.bb.exports.bb_wasm_rec_value_type(value)));
  }

  handleOf(module: object): number {
    if (!(module instanceof Module)) throw new BbError(BbErrorCode.InvalidArgument, 'Graph.call: the callee is not a Module (make one with module())');
    const known = this.#handles.get(module);
    if (known !== undefined) return known;
    const bb = this.bb;
    const hostId = this.#modules.length;
    const handle = bb.withStrings([module.name], (name) =>
      bb.check(bb.exports.bb_wasm_module_new(name!, hostId, module.bootstrap === undefined ? 0 : 1)),
    );
    this.#modules.push(module);
    this.#handles.set(module, handle);
    for (const sub of module.submodules) bb.check(bb.exports.bb_wasm_module_add_submodule(handle, this.handleOf(sub)));
    return handle;
  }

  run(root: Module): Uint8Array {
    const bb = this.bb;
    if (building.has(bb)) throw new BbError(BbErrorCode.InvalidArgument, `module build: a build is in progress already (${root.name} inside a recording callback)`);
    building.add(bb);
    bb.setModuleRecorder((hostId, bootstrap) => this.#record(hostId, bootstrap));
    try {
      const handle = this.handleOf(root);
      this.#live = true;
      const rc = bb.exports.bb_wasm_module_build(handle);
      this.#live = false;
      if (rc < 0) {
        const error = bb.lastError(rc);
        const thrown = this.#thrown?.error;
        // a callback's own exception is rethrown as it was; the package's are the recorder's words
        throw thrown !== undefined && !(thrown instanceof BbError) ? thrown : error;
      }
      return bb.resultBytes();
    } finally {
      this.#live = false;
      bb.setModuleRecorder(undefined);
      building.delete(bb);
      for (const handle of this.#handles.values()) bb.exports.bb_wasm_module_free(handle);
    }
  }

  #record(hostId: number, bootstrap: boolean): void {
    const module = this.#modules[hostId];
    const callback = bootstrap ? module?.bootstrap : module?.body;
    if (module === undefined || callback === undefined) return;
    const g = new Graph(this, module.name, bootstrap);
    this.#stack.push(g);
    try {
      callback(g);
    } catch (error) {
      // the first failure ends the recording; the build reports it
      this.#thrown ??= { error };
      const bb = this.bb;
      const code = error instanceof BbError && error.code < 0 ? error.code : BbErrorCode.InvalidArgument;
      const message = error instanceof BbError ? error.message : `the callback threw ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      bb.withStrings([message], (m) => bb.exports.bb_wasm_rec_fail(code, m!));
    } finally {
      this.#stack.pop();
    }
  }
}
