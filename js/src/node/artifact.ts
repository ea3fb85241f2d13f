/**
 * A compiled artifact read in TypeScript, for what `Compiler.describe` does not say:
 * the configs bound with each slot, every node's metadata, the wires its partitions send
 * on and receive from (so an envelope's `/site/<wire id>` names its wire and the Recvs it
 * fills), and which bindings each partition really uses.
 *
 * ```ts
 * const artifact = inspectArtifact(bytes);
 * const wire = artifact.wires.get(decodeEnvelope(step.bytes!).fills[0]!.site!); // { name, id, out, in, recvs }
 * const used = partitionBindings(Compiler.describe(bb, bytes, 'json'), artifact);
 * ```
 */
import type { ArtifactDescription } from './compiler.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { protoBytes, protoFields, protoString, type ProtoField } from '../engine/protobuf.js';
import { typeHash } from './values.js';

/** Keys and domains of the artifact format, spelled as the engine's C vocabulary spells them. */
export const ARTIFACT_KEYS = {
  compiled: 'ai.bytesandbrains.compiled',
  configPrefix: 'ai.bytesandbrains.config.',
  peerClass: 'ai.bytesandbrains.peer_class',
  slotName: 'ai.bytesandbrains.slot_name',
  depPrefix: 'ai.bytesandbrains.dep.',
  wireDomain: 'ai.bytesandbrains.wire',
  /** Model metadata: `wire_out.<wire>` / `wire_in.<wire>` = `<Kind>|<type>|0x<type hash>`. */
  wireOutPrefix: 'ai.bytesandbrains.wire_out.',
  wireInPrefix: 'ai.bytesandbrains.wire_in.',
  /** On a wire.Send and a wire.Recv: the name of the wire. */
  wireName: 'ai.bytesandbrains.wire.wire_id',
} as const;

/** The longest wire name (BB_WIRE_NAME_MAX). */
const WIRE_NAME_MAX = 255;

/** The value kinds a wire table entry names (bb_type_value_kind). */
const WIRE_KINDS: ReadonlySet<string> = new Set(['Tensor', 'Composite', 'Peer', 'Peers', 'Trigger', 'WireReqId', 'Address', 'Addresses', 'Any']);

/** A wire's id, what a data fill's `/site/<id>` carries: FNV-1a-64 of its name (bb_wire_id). */
export function wireId(name: string): bigint {
  return typeHash(name);
}

export interface ArtifactNode {
  readonly opType: string;
  readonly domain: string;
  readonly name: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly metadata: ReadonlyMap<string, string>;
}

export interface ArtifactFunction {
  readonly name: string;
  /** The peer class of a partition; undefined for a shared function. */
  readonly peerClass?: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly nodes: readonly ArtifactNode[];
  readonly metadata: ReadonlyMap<string, string>;
}

/** How an artifact declares a wire in one direction (a wire table entry). */
export interface WireDeclaration {
  /** The runtime value kind the type stands for: Tensor, Composite, Peer, Peers, Trigger, WireReqId, Address, Addresses, or Any. */
  readonly kind: string;
  /** The type of the value it carries (`ai.bytesandbrains.tensor.f32`, ...); '' when the compiler could not tell. */
  readonly type: string;
  /** FNV-1a-64 of the type, 0n for ''. */
  readonly typeHash: bigint;
}

/** A wire.Recv listening to a wire: its function, and the value it produces. */
export interface WireRecv {
  readonly fn: string;
  readonly value: string;
}

/** A wire the artifact's partitions send on or receive from. */
export interface ArtifactWire {
  readonly name: string;
  /** wireId(name). */
  readonly id: bigint;
  /** Its `wire_out` entry: how the artifact's Sends declare it; undefined when none sends on it. */
  readonly out?: WireDeclaration;
  /** Its `wire_in` entry: how the artifact's Recvs declare it; undefined when none listens. */
  readonly in?: WireDeclaration;
  /** The wire.Recvs listening to it, in model order: a fill of the wire lands on those of the partitions a node runs. */
  readonly recvs: readonly WireRecv[];
}

export interface ArtifactInspection {
  /** Every function, in model order. */
  readonly functions: readonly ArtifactFunction[];
  readonly metadata: ReadonlyMap<string, string>;
  /** The config bound with each slot (empty text when none). */
  readonly configs: ReadonlyMap<string, string>;
  /** Its wires by id (the `/site/<id>` of data fills), in the order the wire table lists them. */
  readonly wires: ReadonlyMap<bigint, ArtifactWire>;
}

/**
 * Reads artifact bytes; a BbError (Malformed) when they are not a compiled artifact, or a
 * wire table entry or a wire.Recv's wire name is not one the compiler writes.
 */
export function inspectArtifact(bytes: Uint8Array): ArtifactInspection {
  const functions: ArtifactFunction[] = [];
  const metadata = new Map<string, string>();
  for (const f of protoFields(bytes, 'ModelProto')) {
    if (f.field === 14) entry(f, 'ModelProto metadata_props', metadata);
    else if (f.field === 25) functions.push(functionOf(f));
  }
  if (!metadata.has(ARTIFACT_KEYS.compiled)) {
    throw new BbError(BbErrorCode.Malformed, `not a compiled artifact: no ${ARTIFACT_KEYS.compiled} passport (compile it first)`);
  }
  const configs = new Map<string, string>();
  for (const [key, value] of metadata) if (key.startsWith(ARTIFACT_KEYS.configPrefix)) configs.set(key.slice(ARTIFACT_KEYS.configPrefix.length), value);
  return { functions, metadata, configs, wires: wiresOf(metadata, functions) };
}

/** One binding as a partition uses it. */
export interface PartitionBinding {
  readonly slot: string;
  readonly role: string;
  readonly type: string;
  readonly config: string;
  /**
   * How the partition reaches it: `op` — its ops call the slot; `dependency` — a declared
   * dependency of a component its ops call; `config` — named in the config of a binding
   * it uses (e.g. CpuMlp's `data=data`).
   */
  readonly reach: 'op' | 'dependency' | 'config';
  /** For `dependency` and `config`: the slot that reaches it. */
  readonly from?: string;
}

/**
 * The bindings each partition uses, by partition name: the artifact's binding table lists
 * every slot for every partition (slot id −1 where its ops never call it); this keeps the
 * slots its ops call, and the slots those components reach — their declared dependencies
 * and the slots their configs name (one step: what a reached component reaches in turn is
 * not the partition's doing). A slot a component reaches only by a default name it does not
 * write into its config is not seen.
 */
export function partitionBindings(description: ArtifactDescription, artifact: ArtifactInspection): Map<string, PartitionBinding[]> {
  const out = new Map<string, PartitionBinding[]>();
  const functions = new Map(artifact.functions.map((fn) => [fn.name, fn]));
  for (const partition of description.partitions) {
    const table = new Map(description.bindings.filter((b) => b.target === partition.name).map((b) => [b.slot, b]));
    const used = new Map<string, PartitionBinding>();
    const use = (slot: string, reach: PartitionBinding['reach'], from?: string): void => {
      const b = table.get(slot);
      if (b === undefined || used.has(slot)) return;
      used.set(slot, { slot, role: b.role, type: b.type, config: artifact.configs.get(slot) ?? '', reach, ...(from === undefined ? {} : { from }) });
    };
    for (const b of table.values()) if (typeof b.slot_id === 'number' && b.slot_id >= 0) use(b.slot, 'op');
    for (const node of functions.get(partition.name)?.nodes ?? []) {
      const slot = node.metadata.get(ARTIFACT_KEYS.slotName);
      if (slot !== undefined) use(slot, 'op');
    }
    for (const node of functions.get(partition.name)?.nodes ?? []) {
      const slot = node.metadata.get(ARTIFACT_KEYS.slotName);
      if (slot === undefined) continue;
      for (const [key, dependency] of node.metadata) if (key.startsWith(ARTIFACT_KEYS.depPrefix)) use(dependency, 'dependency', slot);
    }
    // one step from what the ops call: a slot named in a called slot's config
    for (const b of [...used.values()]) {
      if (b.reach !== 'op') continue;
      for (const named of configValues(b.config)) if (named !== b.slot && table.has(named)) use(named, 'config', b.slot);
    }
    out.set(partition.name, [...used.values()]);
  }
  return out;
}

/** The values of a `key=value,key=value` config. */
function configValues(config: string): string[] {
  return config
    .split(',')
    .map((pair) => pair.slice(pair.indexOf('=') + 1).trim())
    .filter((value, i, all) => value.length > 0 && all.indexOf(value) === i);
}

/** The wire table (model metadata), and the wire.Recvs listening to each wire. */
function wiresOf(metadata: ReadonlyMap<string, string>, functions: readonly ArtifactFunction[]): Map<bigint, ArtifactWire> {
  type Building = { name: string; id: bigint; out?: WireDeclaration; in?: WireDeclaration; recvs: WireRecv[] };
  const wires = new Map<bigint, Building>();
  const wire = (name: string, where: string): Building => {
    if (!wireNameValid(name)) {
      throw new BbError(BbErrorCode.Malformed, `${where} names wire \`${name}\`, which is not a wire name (1 to ${WIRE_NAME_MAX} printable bytes, no blanks or '|')`);
    }
    const id = wireId(name);
    const known = wires.get(id);
    if (known === undefined) {
      const made: Building = { name, id, recvs: [] };
      wires.set(id, made);
      return made;
    }
    if (known.name !== name) throw new BbError(BbErrorCode.Malformed, `wires \`${known.name}\` and \`${name}\` share the id 0x${id.toString(16).padStart(16, '0')}`);
    return known;
  };
  for (const [key, value] of metadata) {
    const out = key.startsWith(ARTIFACT_KEYS.wireOutPrefix);
    if (!out && !key.startsWith(ARTIFACT_KEYS.wireInPrefix)) continue;
    const name = key.slice((out ? ARTIFACT_KEYS.wireOutPrefix : ARTIFACT_KEYS.wireInPrefix).length);
    const declaration = wireEntry(value);
    if (declaration === undefined) throw new BbError(BbErrorCode.Malformed, `wire table entry \`${key}\` = \`${value}\` is not \`<Kind>|<type>|0x<type hash>\``);
    const w = wire(name, `wire table entry \`${key}\``);
    if (out) w.out = declaration;
    else w.in = declaration;
  }
  for (const fn of functions) {
    for (const node of fn.nodes) {
      const value = node.outputs[0];
      const name = node.metadata.get(ARTIFACT_KEYS.wireName);
      if (node.domain !== ARTIFACT_KEYS.wireDomain || node.opType !== 'Recv' || name === undefined || value === undefined || value.length === 0) continue;
      wire(name, `the wire.Recv of \`${fn.name}\` producing \`${value}\``).recvs.push({ fn: fn.name, value });
    }
  }
  return wires;
}

/** bb_wire_name_valid: 1 to 255 bytes of printable ASCII, no blanks or '|'. */
function wireNameValid(name: string): boolean {
  return name.length > 0 && name.length <= WIRE_NAME_MAX && /^[!-{}~]+$/.test(name);
}

/** A wire table entry `<Kind>|<type>|0x<16 hex digits of the type's hash>`, exactly as bb_wire_entry_format writes it. */
function wireEntry(value: string): WireDeclaration | undefined {
  const parts = value.split('|');
  if (parts.length !== 3) return undefined;
  const [kind, type, hash] = parts as [string, string, string];
  if (!WIRE_KINDS.has(kind) || type.length > WIRE_NAME_MAX) return undefined;
  const expected = type.length === 0 ? 0n : typeHash(type);
  if (hash !== `0x${expected.toString(16).padStart(16, '0')}`) return undefined;
  return { kind, type, typeHash: expected };
}

function functionOf(f: ProtoField): ArtifactFunction {
  let name = '';
  const inputs: string[] = [];
  const outputs: string[] = [];
  const nodes: ArtifactNode[] = [];
  const metadata = new Map<string, string>();
  for (const g of protoFields(protoBytes(f, 'ModelProto functions'), 'FunctionProto', f.at)) {
    if (g.field === 1) name = protoString(g, 'FunctionProto name');
    else if (g.field === 4) inputs.push(protoString(g, 'FunctionProto input'));
    else if (g.field === 5) outputs.push(protoString(g, 'FunctionProto output'));
    else if (g.field === 7) nodes.push(nodeOf(g));
    else if (g.field === 14) entry(g, 'FunctionProto metadata_props', metadata);
  }
  const peerClass = metadata.get(ARTIFACT_KEYS.peerClass);
  return { name, ...(peerClass === undefined ? {} : { peerClass }), inputs, outputs, nodes, metadata };
}

function nodeOf(f: ProtoField): ArtifactNode {
  let opType = '';
  let domain = '';
  let name = '';
  const inputs: string[] = [];
  const outputs: string[] = [];
  const metadata = new Map<string, string>();
  for (const g of protoFields(protoBytes(f, 'FunctionProto node'), 'NodeProto', f.at)) {
    if (g.field === 1) inputs.push(protoString(g, 'NodeProto input'));
    else if (g.field === 2) outputs.push(protoString(g, 'NodeProto output'));
    else if (g.field === 3) name = protoString(g, 'NodeProto name');
    else if (g.field === 4) opType = protoString(g, 'NodeProto op_type');
    else if (g.field === 7) domain = protoString(g, 'NodeProto domain');
    else if (g.field === 9) entry(g, 'NodeProto metadata_props', metadata);
  }
  return { opType, domain, name, inputs, outputs, metadata };
}

function entry(f: ProtoField, what: string, into: Map<string, string>): void {
  let key = '';
  let value = '';
  for (const g of protoFields(protoBytes(f, what), what, f.at)) {
    if (g.field === 1) key = protoString(g, `${what} key`);
    else if (g.field === 2) value = protoString(g, `${what} value`);
  }
  into.set(key, value);
}
