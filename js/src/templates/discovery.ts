/**
 * How a server learns the ids of its clients — the two ways the templates offer:
 *
 * - `'registry'` (the default): every client announces itself to the server
 *   (GlobalRegistry: an Announce when it starts, then a heartbeat), and the server's
 *   PeerSelector is the registry's live view, so clients may join and leave at any time. A
 *   client only needs the server's id. The announce sits in the Module's bootstrap, which
 *   asks its host for the server's id (a bootstrap command the template's install answers).
 * - `'seats'`: the server is given the list of its clients' ids when it starts (as the
 *   federated_digits example is), e.g. from a room the app filled beforehand.
 *
 * Peer ids are opaque base58 strings here. A peer that joins a signalling room has the id of
 * its Ed25519 identity (`bytesandbrains/identity`: loadIdentity keeps a page's across
 * reloads), and is installed with `self: identity.peerId`.
 */
import type { Graph } from '../dsl/graph.js';
import type { BbNode } from '../node/node.js';
import { peerValue } from '../node/values.js';

export type Discovery = 'registry' | 'seats';

/** The app event a registry bootstrap raises to ask its host for the server's id. */
export const SERVER_REQUEST_TOPIC = 'registry_server';

/** The slot of the registry's client side (a Protocol) on every peer. */
export const REGISTRY_SLOT = 'discovery';

/**
 * Records the registry bootstrap: a command the host completes with the server's peer id,
 * then Announce to it (the server's own node announces to nobody).
 */
export function recordAnnounce(g: Graph): void {
  const request = g.bootstrapDispatch();
  g.appEmit(SERVER_REQUEST_TOPIC, request);
  g.announce(g.bootstrapOutput(request));
}

/** Answers the registry bootstrap's requests on `node` with `server`, and runs the bootstrap. */
export function answerServerRequests(node: BbNode, server: string, nowNs?: bigint): void {
  node.onStep((step) => {
    if (step.kind !== 'appEvent' || step.topic !== SERVER_REQUEST_TOPIC || step.value?.kind !== 'commandId') return;
    node.complete(step.value.value, [peerValue(server)]);
  });
  node.runBootstrap(nowNs);
}
