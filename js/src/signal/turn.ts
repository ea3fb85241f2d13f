/**
 * Short-lived TURN credentials in coturn's REST scheme (`use-auth-secret` with a
 * `static-auth-secret`): username "<expiry Unix seconds>:<peer id>", credential
 * base64(HMAC-SHA1(secret, username)). The TURN server recomputes the credential from the
 * username and its copy of the secret and refuses it after the expiry, so no long-lived
 * password ever reaches a browser. Node only (node:crypto).
 */
import { createHmac } from 'node:crypto';
import type { IceServer } from '../engine/platform.js';

export interface TurnOptions {
  /** coturn's static-auth-secret. */
  secret: string;
  /** turn: / turns: URLs of the TURN server(s), e.g. `turn:turn.example.org:3478?transport=udp`. */
  urls: string[];
  /** How long credentials last (default 3600 s); clients ask for fresh ones before then. */
  ttlSeconds?: number;
}

export const DEFAULT_TURN_TTL_SECONDS = 3600;

/** Credentials for `peer`, valid until `nowSeconds` + the ttl. */
export function turnCredentials(turn: TurnOptions, peer: string, nowSeconds: number): IceServer {
  const username = `${nowSeconds + (turn.ttlSeconds ?? DEFAULT_TURN_TTL_SECONDS)}:${peer}`;
  const credential = createHmac('sha1', turn.secret).update(username).digest('base64');
  return { urls: [...turn.urls], username, credential };
}
