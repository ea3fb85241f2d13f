export { Identity, verifySignature, IDENTITY_EXPORT_BYTES, type IdentityOptions, type Signer } from './identity.js';
export { loadIdentity, forgetIdentity, type IdentityStoreOptions } from './store.js';
export { peerIdFromPublicKey, publicKeyFromPeerId, ED25519_PEER_ID_PREFIX, ED25519_PUBLIC_KEY_BYTES } from './peer-id.js';
export { ed25519KeyRefusal } from './public-key.js';
export { ed25519Backend, useEd25519Backend, type Ed25519Backend } from './ed25519.js';
export { toBase64, toBase64Url, fromBase64 } from './bytes.js';
