/**
 * The DSL in TypeScript: Modules recorded through bb.wasm's recorder, the same one C
 * programs use. Read docs/MODULES.md of the package for what a Module may record and
 * what the recorded ONNX model holds.
 */
export { module, Module, type ModuleOptions, type Recording } from './module.js';
export { Graph, ModuleCall, type OpOptions, type SplitOptions } from './graph.js';
export { AggregatorSlot, BackendSlot, CodecSlot, DataSourceSlot, IndexSlot, ModelSlot, PeerSelectorSlot } from './slots.js';
export { GraphValue, OMITTED, TYPES, tensorType, type ValueType } from './value.js';
export {
  attributeOfType,
  float,
  floats,
  int,
  ints,
  type AttributeValue,
  type Attributes,
  type Literal,
  type TypedAttribute,
} from './attributes.js';
