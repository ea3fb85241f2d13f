/**
 * Templates for the common federations, each a few lines, built on the DSL: a Plan holds
 * the Module (plan.module, written in TypeScript), compiles it with its bindings, and
 * installs servers and clients. "Federate your own model" in the README walks through one.
 */
export { type Compression } from './compress.js';
export { federatedAveraging, type AdaptiveClip, type DpOptions, type FederatedAveragingOptions, type SecureOptions } from './federated.js';
export { federatedEvaluation, type FederatedEvaluationOptions } from './evaluation.js';
export { gossipLearning, GossipPlan, type GossipLearningOptions, type GossipPeer, type GossipPeerOptions } from './gossip.js';
export { componentModel, cpuMlp, onnxModel, type CpuMlpConfig, type ModelChoice, type OnnxModelOptions } from './models.js';
export { Plan, roundReporter, type ClientOptions, type Refusals, type RoundReport, type ServerNode, type ServerOptions } from './plan.js';
export { SERVER_REQUEST_TOPIC, type Discovery } from './discovery.js';
export { servedPlan, type ServedPlan } from './served.js';
export { splitLearning, SplitPlan, type SplitClient, type SplitClientOptions, type SplitCounts, type SplitLearningOptions, type SplitModelSource, type SplitServer, type SplitServerOptions, type SplitTraining } from './split.js';
