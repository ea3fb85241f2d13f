/**
 * A compiled artifact read in TypeScript, for what `Compiler.describe` does not say:
 * the configs bound with each slot, every node's metadata, the value site each wire.Recv
 * fills (so an envelope's `/site/<id>` names its wire edge), and which bindings each
 * partition really uses.
 *
 * ```ts
 * const artifact = inspectArtifact(bytes);
 * const edge = artifact.recvSites.get(decodeEnvelope(step.bytes!).fills[0]!.site!); // { fn, value }
 * const used = partitionBindings(Compiler.describe(bb, bytes, 'json'), artifact);
 * ```
 */
import type { ArtifactDescription } from './compiler.js';
import { BbError, BbErrorCode } from './errors.js';
import { protoBytes, protoFields, protoString, type ProtoField } from './protobuf.js';

/** Keys and domains of the artifact format (include/bb/artifact.h spells each once). */
export const ARTIFACT_KEYS = {
  compiled: 'ai.bytesandbrains.compiled',
  configPrefix: 'ai.bytesandbrains.config.',
  peerClass: 'ai.bytesandbrains.peer_class',
  slotName: 'ai.bytesandbrains.slot_name',
  depPrefix: 'ai.bytesandbrains.dep.',
  wireDomain: 'ai.bytesandbrains.wire',
} as const;

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

/** The value a wire.Recv produces, and its function. */
export interface RecvSite {
  readonly fn: string;
  readonly value: string;
}

export interface ArtifactInspection {
  /** Every function, in model order. */
  readonly functions: readonly ArtifactFunction[];
  readonly metadata: ReadonlyMap<string, string>;
  /** The config bound with each slot (empty text when none). */
  readonly configs: ReadonlyMap<string, string>;
  /** Global site id → the wire.Recv payload it is, numbered as install numbers sites. */
  readonly recvSites: ReadonlyMap<bigint, RecvSite>;
}

/** Reads artifact bytes; a BbError (Malformed) when they are not a compiled artifact. */
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
  return { functions, metadata, configs, recvSites: recvSitesOf(functions) };
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

/**
 * Site ids as install assigns them: functions in model order; in each, node outputs in
 * order, then its inputs, then outputs not seen yet; one id per distinct name.
 */
function recvSitesOf(functions: readonly ArtifactFunction[]): Map<bigint, RecvSite> {
  const sites = new Map<bigint, RecvSite>();
  let base = 0n;
  for (const fn of functions) {
    const index = new Map<string, bigint>();
    const add = (name: string): void => {
      if (name.length > 0 && !index.has(name)) index.set(name, BigInt(index.size));
    };
    for (const node of fn.nodes) node.outputs.forEach(add);
    fn.inputs.forEach(add);
    fn.outputs.forEach(add);
    for (const node of fn.nodes) {
      const value = node.outputs[0];
      if (node.domain === ARTIFACT_KEYS.wireDomain && node.opType === 'Recv' && value !== undefined && value.length > 0) {
        sites.set(base + index.get(value)!, { fn: fn.name, value });
      }
    }
    base += BigInt(index.size);
  }
  return sites;
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
