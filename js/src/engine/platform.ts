/**
 * The platform types the package's API names, spelled so that its declarations compile in
 * a project without the DOM library — a Node program with `lib: ["ES2023"]` — as well as in
 * a page. Where the platform has the type as a global (a page's `CryptoKey`,
 * `WebAssembly.Module`, `RTCPeerConnection`), it is the platform's own; where it has not,
 * the part the package uses, which the platform's values fit.
 */

type Platform = typeof globalThis;

/** `WebAssembly.Module` where the platform has it (never where it does not). */
export type WasmModule = Platform extends { WebAssembly: { Module: { prototype: infer M } } } ? M : never;

/** `WebAssembly.Memory` where the platform has it; else the part the package reads. */
export type WasmMemory = Platform extends { WebAssembly: { Memory: { prototype: infer M } } } ? M : { readonly buffer: ArrayBuffer };

/** The imports `WebAssembly.instantiate` takes: module name → import name → value. */
export type WasmImports = Record<string, Record<string, WasmImportValue>>;
export type WasmImportValue = ((...args: never[]) => unknown) | WasmMemory | number;

/** WebCrypto's `CryptoKey` where the platform has it as a global; else an opaque object. */
export type WebCryptoKey = Platform extends { CryptoKey: { prototype: infer K } } ? K : object;

/** The platform's `IDBFactory` (`indexedDB`) where it has one as a global; else an opaque object. */
export type IndexedDbFactory = Platform extends { IDBFactory: { prototype: infer F } } ? F : object;

/** An ICE server (STUN or TURN) as `RTCIceServer` describes one; the platform's fit it. */
export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

/**
 * What an RTCPeerConnection is made with (`RTCConfiguration`'s fields the package sets, and
 * any other a polyfill reads, such as node-datachannel's `bindAddress`).
 */
export interface RtcConfiguration {
  iceServers?: IceServer[];
  iceTransportPolicy?: 'all' | 'relay';
  iceCandidatePoolSize?: number;
  [option: string]: unknown;
}

/** `RTCPeerConnection` where the platform has it; else an object (node-datachannel's polyfill makes one). */
export type PeerConnection = Platform extends { RTCPeerConnection: { prototype: infer P } } ? P : object;
