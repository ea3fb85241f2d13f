/**
 * bytesandbrains: the C core as a standalone WebAssembly module, driven from TypeScript.
 *
 * ```ts
 * import { loadBb, OnnxModel, CpuSession, Tensor } from 'bytesandbrains';
 * const bb = await loadBb();
 * const model = OnnxModel.decode(bb, bytes);
 * const session = new CpuSession(bb, model);
 * const x = Tensor.from(bb, 'float', new Float32Array([1, 2, 3]), [3]);
 * const { y } = session.run({ x });
 * console.log(y?.toArray());
 * for (const object of [x, y, session, model]) object?.free();
 * ```
 */
export { loadBb, relaxedSimdSupported, type LoadOptions, type SimdBuild, type WasmSource } from './engine/loader.js';
export { Bb } from './engine/bb.js';
export { OnnxModel, type KeyValue, type ModelSummary, type OpCount } from './engine/model.js';
export {
  OnnxTrainer,
  type Batch,
  type EvaluateResult,
  type FitOptions,
  type FitResult,
  type StepResult,
  type TrainerOptions,
  type TrainerStats,
} from './train/trainer.js';
export { Tensor, MAX_RANK } from './engine/tensor.js';
export { CpuSession, type ArrayInput, type ArrayOutput, type CpuOp } from './engine/session.js';
export {
  encodeOnnxModel,
  type OnnxAttribute,
  type OnnxInitializerSpec,
  type OnnxModelSpec,
  type OnnxNodeSpec,
  type OnnxValueSpec,
} from './engine/onnx-builder.js';
export { DTYPE_NAMES, isDType, type DType, type DTypeArrays, type TensorArray } from './engine/dtype.js';
export { BbError, BbErrorCode, BbExitError, BbLoadError, bbErrorCodeName } from './engine/errors.js';
export {
  PollDriver,
  type Clock,
  type Pollable,
  type PollDriverOptions,
  type PollDriverState,
  type PollDriverStats,
  type Timers,
  type VisibilitySource,
} from './node/driver.js';
export { Compiler, ROLES, TENSOR_F32, type ArtifactDescription, type ExampleInfo, type Role } from './node/compiler.js';
export { Dataset, splitForFederation, type CsvOptions } from './train/dataset.js';
export { dpEpsilon, type DpEpsilon, type DpEpsilonOptions } from './train/privacy.js';
export type { PeerRole } from './signal/protocol.js';
export { BbNode, monotonicNowNs, type NodeAdmission, type NodeOptions, type NodeStats, type SlotOptions, type Step, type StepKind } from './node/node.js';
export {
  registerComponentType,
  type ComponentContext,
  type ComponentInit,
  type ComponentInstance,
  type ComponentType,
  type ControlMessage,
  type OpCall,
  type OpOutputs,
} from './node/component.js';
export {
  aggregatorComponent,
  backendComponent,
  codecComponent,
  dataSourceComponent,
  indexComponent,
  modelComponent,
  peerSelectorComponent,
  protocolComponent,
  type AggregatorComponent,
  type BackendComponent,
  type CodecComponent,
  type ComponentExtras,
  type DataSourceComponent,
  type IndexComponent,
  type ModelComponent,
  type PeerSelectorComponent,
  type ProtocolComponent,
} from './node/roles.js';
export {
  bytesValue,
  compositeValue,
  peerIdFromU64,
  peersValue,
  peerValue,
  randomPeerId,
  scalarOf,
  tensorValue,
  trigger,
  u64Value,
  type HostTensor,
  type U64Kind,
  type Value,
  type ValueKind,
} from './node/values.js';
export { LocalNetwork, type LocalNetworkOptions } from './node/local.js';
export { getDefaultLogger, Notices, setDefaultLogger, shortPeer, watchNode, type Logger } from './node/notices.js';
export { CODEC_REFUSALS, trafficOf, type Traffic } from './phones/traffic.js';
export {
  indexedDbStore,
  keepNode,
  memoryStore,
  readSavedNode,
  restoreSaved,
  resumeNode,
  saveNode,
  type Keeper,
  type KeepOptions,
  type Resumed,
  type ResumeOptions,
  type SavedNode,
  type SaveOptions,
  type StateStore,
} from './phones/resume.js';
export {
  measuredPolls,
  ParticipationPolicy,
  type BatteryLike,
  type ConnectionLike,
  type DocumentLike,
  type NavigatorLike,
  type ParticipationOptions,
  type ParticipationState,
  type WaitReason,
} from './phones/participation.js';
export * from './dsl/index.js';
export { admitRoomMembers, connectPeer, runPeer, type ConnectPeerOptions, type PeerOptions, type PeerStats, type RunningPeer, type SignallingEvent } from './node/peer.js';
export * from './templates/index.js';
export { forgetIdentity, Identity, loadIdentity, verifySignature, type IdentityOptions, type IdentityStoreOptions, type Signer } from './identity/index.js';
// The worked examples (the digits federations, their data and CNN) live at
// 'bytesandbrains/examples'; the wire codecs, the artifact inspector and the ABI, for
// tools that look inside envelopes and artifacts, at 'bytesandbrains/internals'.
// Networking has its own entry points, so pages that only compute never load it:
// 'bytesandbrains/transport' (WebRtcTransport), 'bytesandbrains/signal' (the signalling
// client) and, in Node only, 'bytesandbrains/signal/server'.
