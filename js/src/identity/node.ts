/** The Node-only part of identities: keeping them in files. */
export { loadIdentityFile, saveIdentityFile } from './file.js';
