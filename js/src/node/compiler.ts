/**
 * The partitioning compiler, running in bb.wasm: record an example's Module (or bring
 * ONNX ModelProto bytes recorded elsewhere), bind concretes to its role slots and compile
 * it into the artifact every peer installs.
 *
 * ```ts
 * const compiler = Compiler.forExample(bb, 'federated_digits');
 * compiler.rebind('aggregator', 'Aggregator', 'FedAvg', 'quorum=3,target=4,deadline_ms=1000,no_quorum=abandon,init=model');
 * const artifact = compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
 * compiler.free();
 * ```
 */
import type { Bb } from '../engine/bb.js';
import { BbError, BbErrorCode } from '../engine/errors.js';

/** The role slots a compiler binds (bb_role). */
export const ROLES = {
  Backend: 1,
  Model: 2,
  Index: 3,
  Aggregator: 4,
  Codec: 5,
  DataSource: 6,
  PeerSelector: 7,
  Protocol: 8,
} as const;
export type Role = keyof typeof ROLES;

/** An example linked into bb.wasm (src/programs). */
export interface ExampleInfo {
  readonly name: string;
  readonly description: string;
  readonly modules: number;
}

/** What `describe` reports as JSON: what `bb inspect --json` prints for an artifact. */
export interface ArtifactDescription {
  readonly partitions: readonly { readonly name: string; readonly peer_class: string; readonly nodes: readonly unknown[] }[];
  /** A Send's value paired with each Recv listening to its wire: partitions, the sent value, the Recv's value (`site`), the wire's name. */
  readonly wire_edges: readonly { readonly from: string; readonly to: string; readonly value: string; readonly site: string; readonly wire: string }[];
  /** The wire table: one row per wire and direction; type_hash and id as `0x` and 16 hex digits. */
  readonly wires: readonly {
    readonly name: string;
    readonly direction: 'in' | 'out';
    readonly kind: string;
    readonly type: string;
    readonly type_hash: string;
    readonly id: string;
  }[];
  /** One row per partition and slot; slot_id is -1 where the partition's ops never call the slot. */
  readonly bindings: readonly { readonly target: string; readonly slot: string; readonly role: string; readonly type: string; readonly slot_id: number | string }[];
}

/** The f32 tensor storage the shipped concretes declare. */
export const TENSOR_F32 = 'ai.bytesandbrains.tensor.f32';

export class Compiler {
  readonly #bb: Bb;
  #handle: number;

  constructor(bb: Bb) {
    this.#bb = bb;
    this.#handle = bb.check(bb.exports.bb_wasm_compiler_new());
  }

  /** A compiler configured as the example configures Module `module` (its default concretes). */
  static forExample(bb: Bb, name: string, module = 0): Compiler {
    const compiler = new Compiler(bb);
    try {
      bb.withStrings([name], (namePtr) =>
        bb.check(bb.exports.bb_wasm_compiler_configure_example(compiler.#live('forExample'), namePtr, module)),
      );
      return compiler;
    } catch (error) {
      compiler.free();
      throw error;
    }
  }

  /** The examples bb.wasm carries. */
  static examples(bb: Bb): ExampleInfo[] {
    const count = bb.exports.bb_wasm_example_count();
    return Array.from({ length: count }, (_, i) => ({
      name: bb.readCString(bb.checkPointer(bb.exports.bb_wasm_example_name(i))),
      description: bb.readCString(bb.checkPointer(bb.exports.bb_wasm_example_description(i))),
      modules: bb.check(bb.exports.bb_wasm_example_module_count(i)),
    }));
  }

  /** Records an example's Module: ONNX ModelProto bytes for `compile`. */
  static recordExample(bb: Bb, name: string, module = 0): Uint8Array {
    bb.withStrings([name], (namePtr) => bb.check(bb.exports.bb_wasm_example_record(namePtr, module)));
    return bb.resultBytes();
  }

  /** Describes an artifact: its partitions, wire edges, wires and bindings. */
  static describe(bb: Bb, artifact: Uint8Array, format: 'json'): ArtifactDescription;
  static describe(bb: Bb, artifact: Uint8Array, format?: 'text' | 'dot'): string;
  static describe(bb: Bb, artifact: Uint8Array, format: 'text' | 'dot' | 'json' = 'text'): string | ArtifactDescription {
    const code = format === 'text' ? 0 : format === 'dot' ? 1 : 2;
    bb.withBytes(artifact, (ptr, len) => bb.check(bb.exports.bb_wasm_artifact_describe(ptr, len, code)));
    const text = bb.resultText();
    return format === 'json' ? (JSON.parse(text) as ArtifactDescription) : text;
  }

  /** Binds a concrete type (a registry name) to a slot; `role` undefined takes the role the model records. */
  bind(slot: string, role: Role | undefined, type: string, config?: string): this {
    const bb = this.#bb;
    bb.withStrings([slot, type, config], (slotPtr, typePtr, configPtr) =>
      bb.check(bb.exports.bb_wasm_compiler_bind(this.#live('bind'), role === undefined ? 0 : ROLES[role], slotPtr!, typePtr!, configPtr!)),
    );
    return this;
  }

  /** Removes a slot's binding (BbError NotFound when it has none). */
  unbind(slot: string): this {
    const bb = this.#bb;
    bb.withStrings([slot], (slotPtr) => bb.check(bb.exports.bb_wasm_compiler_unbind(this.#live('unbind'), slotPtr)));
    return this;
  }

  /** unbind (when bound) then bind. */
  rebind(slot: string, role: Role | undefined, type: string, config?: string): this {
    try {
      this.unbind(slot);
    } catch (error) {
      if (!(error instanceof BbError && error.code === BbErrorCode.NotFound)) throw error;
    }
    return this.bind(slot, role, type, config);
  }

  /**
   * Declares a concrete type: the tensor storage its ports hold (e.g. TENSOR_F32) and the
   * slots it reaches (`{ Model: 'model' }`-style pairs as [role, slot]).
   */
  declare(type: string, storage?: string, deps: readonly (readonly [Role, string])[] = []): this {
    const bb = this.#bb;
    const depText = deps.map(([role, slot]) => `${role}:${slot}`).join(',');
    bb.withStrings([type, storage, depText], (typePtr, storagePtr, depsPtr) =>
      bb.check(bb.exports.bb_wasm_compiler_declare(this.#live('declare'), typePtr!, storagePtr!, depsPtr!)),
    );
    return this;
  }

  /**
   * Declares the ONNX operators a Backend type runs (a name, or [domain, name] for another
   * domain): every Backend op bound to a slot of that type must be one of them. CpuBackend's
   * set is declared in every new compiler, as `bb compile` declares it.
   */
  declareOpSet(type: string, ops: readonly (string | readonly [domain: string, op: string])[]): this {
    const bb = this.#bb;
    const packed = new TextEncoder().encode(ops.map((op) => (typeof op === 'string' ? `\0${op}\0` : `${op[0]}\0${op[1]}\0`)).join(''));
    bb.withStrings([type], (typePtr) =>
      bb.withBytes(packed, (ptr, len) => bb.check(bb.exports.bb_wasm_compiler_declare_op_set(this.#live('declareOpSet'), typePtr!, ptr, len))),
    );
    return this;
  }

  /** Accepts values whose type stays unresolved (strict is the default). */
  setPermissiveTypes(permissive: boolean): this {
    this.#bb.check(this.#bb.exports.bb_wasm_compiler_set_permissive(this.#live('setPermissiveTypes'), permissive ? 1 : 0));
    return this;
  }

  /** Compiles recorded ModelProto bytes into artifact bytes; a failure is a BbError whose message names the kind. */
  compile(model: Uint8Array): Uint8Array {
    const bb = this.#bb;
    bb.withBytes(model, (ptr, len) => bb.check(bb.exports.bb_wasm_compiler_compile(this.#live('compile'), ptr, len)));
    return bb.resultBytes();
  }

  /** The kind of the last failed compile ("Ok" after a success). */
  get lastErrorKind(): string {
    const bb = this.#bb;
    return bb.readCString(bb.exports.bb_wasm_compile_error_name(bb.check(bb.exports.bb_wasm_compiler_error_kind(this.#live('lastErrorKind')))));
  }

  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#bb.check(this.#bb.exports.bb_wasm_compiler_free(handle));
  }

  #live(what: string): number {
    if (this.#handle === 0) throw new BbError(BbErrorCode.InvalidArgument, `Compiler.${what}: the compiler was freed`);
    return this.#handle;
  }
}
