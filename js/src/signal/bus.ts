/**
 * What several signalling processes share so a room spans them: who is in which room on
 * which process, and a way to hand a signal to the process holding its addressee. A
 * {@link SignalServer} given a bus admits and verifies its own sockets as before (every
 * process runs the same policies), publishes its members, and relays signals for members
 * it does not hold through the bus. The Redis implementation is redis.ts.
 */
import type { PeerRole } from './protocol.js';

/**
 * A member of a room held by another process. A bus hands out the same object for as long
 * as the member stays (one session): a new object is a new stay.
 */
export interface RemoteMember {
  readonly peer: string;
  readonly role: PeerRole;
  /** The join token it joined with, if any (its own process's admission verified it). */
  readonly token?: string;
}

/** What a bus tells the server it serves. */
export interface RoomBusHandlers {
  /** A member joined (`role` set) or left (`role` null) a room on another process. */
  presence(room: string, peer: string, role: PeerRole | null): void;
  /** A signal from a member on another process for `to`, a member of this one. */
  signal(room: string, from: string, to: string, data: unknown): void;
  /** `peer` joined `room` again on another process: this one's socket for it is stale. */
  replaced(room: string, peer: string): void;
}

export interface RoomBus {
  /** Starts taking events for this server; called once, by the server. */
  start(handlers: RoomBusHandlers): Promise<void>;
  /**
   * Records `peer` as a member of `room` held here and tells the other processes; resolves
   * with the room's members held elsewhere (on processes still alive).
   */
  join(room: string, peer: string, role: PeerRole, token?: string): Promise<RemoteMember[]>;
  /** `peer` left `room` here (if another process holds it now, nothing changes). */
  leave(room: string, peer: string): void;
  /** `peer` of `room` as another process holds it, or undefined when no other does. */
  remote(room: string, peer: string): RemoteMember | undefined;
  /**
   * Hands a signal to the process holding `to`: undefined when no other process does,
   * else a promise settled once the signal has left this process (until then the server
   * counts it against its budget).
   */
  relay(room: string, from: string, to: string, data: unknown): Promise<void> | undefined;
  /** No member of `room` is held here any more: its remote members need not be followed. */
  forget(room: string): void;
  /** Leaves the bus: this process's members are released and its connections closed. */
  close(): Promise<void>;
}
