/**
 * Who may take part in a room (a federation): peer ids the operator listed, or holders of
 * join tokens the operator signed. A room without a policy is open when the server says
 * rooms are open: any proven identity joins it, in the role it asks for.
 */
import { fromBase64 } from '../identity/bytes.js';
import { decodeJoinToken, verifyJoinToken } from './token.js';
import { NAME_PATTERN, PEER_ROLES, type PeerRole } from './protocol.js';

export interface RoomPolicy {
  /** Peer ids admitted, each with its role. */
  readonly allow?: Readonly<Record<string, PeerRole>> | ReadonlyMap<string, PeerRole>;
  /** Operators' 32-byte Ed25519 public keys: a join token signed by one admits its holder. */
  readonly operators?: readonly Uint8Array[];
}

/** Policies by room name, or a function that looks one up (undefined: the room has none). */
export type RoomPolicies = Readonly<Record<string, RoomPolicy>> | ((room: string) => RoomPolicy | undefined);

export interface AdmissionRequest {
  readonly room: string;
  readonly peer: string;
  readonly role: PeerRole;
  readonly token: string | undefined;
}

export function policyOf(policies: RoomPolicies | undefined, room: string): RoomPolicy | undefined {
  if (policies === undefined) return undefined;
  if (typeof policies === 'function') return policies(room);
  return Object.hasOwn(policies, room) ? policies[room] : undefined;
}

function listed(allow: RoomPolicy['allow'], peer: string): PeerRole | undefined {
  if (allow === undefined) return undefined;
  if (allow instanceof Map) return allow.get(peer);
  const record = allow as Readonly<Record<string, PeerRole>>;
  return Object.hasOwn(record, peer) ? record[peer] : undefined;
}

/**
 * Null when the join is admitted in the role it asks for; else why not. The role is the
 * policy's (the allowlist's or the token's): a join asking for another is refused, so a
 * peer never ends up in a role it did not sign for. A join token brought along is checked
 * whatever admits its holder — by the room's operators, or in a room without any by the
 * key that signed it — and refuses the join when it does not hold: a token that gets past
 * the join is one the room may be shown, well formed and genuinely signed.
 */
export async function admissionRefusal(policy: RoomPolicy | undefined, openRooms: boolean, request: AdmissionRequest, nowSeconds: number): Promise<string | null> {
  if (policy === undefined && !openRooms) return `room ${request.room} has no admission policy and this server admits none without one`;
  const operators = policy?.operators ?? [];
  if (request.token !== undefined) {
    const refusal = await tokenRefusal(request, request.token, operators, nowSeconds);
    if (refusal !== null) return refusal;
  }
  if (policy === undefined) return null;
  const role = listed(policy.allow, request.peer);
  if (role !== undefined) return roleRefusal(request, role, `room ${request.room}'s list`);
  if (request.token === undefined) return `${request.peer} is not on room ${request.room}'s list and brings no join token`;
  if (operators.length === 0) return `room ${request.room} takes no join tokens`;
  return null; // its token, checked against the room's operators, admits it
}

/** Why `token` does not hold for the join (signed by one of `operators`, or without any by the key it names); null when it does. */
async function tokenRefusal(request: AdmissionRequest, token: string, operators: readonly Uint8Array[], nowSeconds: number): Promise<string | null> {
  // a token that does not decode is refused as such before its signer matters
  const signer = decodeJoinToken(token)?.token.operator;
  const trusted = operators.length > 0 || signer === undefined ? operators : [signer];
  try {
    const granted = await verifyJoinToken(token, { peer: request.peer, room: request.room, operators: trusted, now: nowSeconds });
    return roleRefusal(request, granted.role, 'the join token');
  } catch (error) {
    return (error as Error).message;
  }
}

function roleRefusal(request: AdmissionRequest, role: PeerRole, by: string): string | null {
  return role === request.role ? null : `${by} admits ${request.peer} as ${role}, not as ${request.role}`;
}

/**
 * Room policies from JSON (the signalling command's --policy file):
 * `{ "openRooms": false, "rooms": { "<room>": { "allow": { "<peer id>": "server", ... },
 * "operators": ["<base64 Ed25519 public key>", ...] } } }`. Throws naming what is wrong.
 */
export function parseRoomPolicies(json: unknown): { rooms: Record<string, RoomPolicy>; openRooms: boolean } {
  const fail = (why: string): never => {
    throw new Error(`room policy: ${why}`);
  };
  if (typeof json !== 'object' || json === null) fail('not a JSON object');
  const { rooms = {}, openRooms = true } = json as { rooms?: unknown; openRooms?: unknown };
  if (typeof openRooms !== 'boolean') fail('openRooms is not true or false');
  if (typeof rooms !== 'object' || rooms === null) fail('rooms is not an object');
  const out: Record<string, RoomPolicy> = {};
  for (const [room, value] of Object.entries(rooms as Record<string, unknown>)) {
    if (!NAME_PATTERN.test(room)) fail(`room name ${JSON.stringify(room)} is not 1–128 of [A-Za-z0-9_-]`);
    const { allow = {}, operators = [] } = (value ?? {}) as { allow?: unknown; operators?: unknown };
    if (typeof allow !== 'object' || allow === null) fail(`rooms.${room}.allow is not an object of peer id → role`);
    for (const [peer, role] of Object.entries(allow as Record<string, unknown>)) {
      if (!NAME_PATTERN.test(peer)) fail(`rooms.${room}.allow: ${JSON.stringify(peer)} is not a peer id`);
      if (!PEER_ROLES.includes(role as PeerRole)) fail(`rooms.${room}.allow.${peer}: ${JSON.stringify(role)} is not client, server or watcher`);
    }
    if (!Array.isArray(operators)) fail(`rooms.${room}.operators is not a list`);
    const keys = (operators as unknown[]).map((key, i) => fromBase64(key, 32) ?? fail(`rooms.${room}.operators[${i}] is not a 32-byte key in base64`));
    out[room] = { allow: allow as Record<string, PeerRole>, operators: keys };
  }
  return { rooms: out, openRooms: openRooms as boolean };
}
