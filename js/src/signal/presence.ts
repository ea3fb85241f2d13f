/**
 * Membership changes of one room, coalesced between two announcements. However often a
 * peer joins and leaves in between, the members hear at most one `left` and one `joined`
 * for it, so churn costs them one message per announcement, not one per change.
 */
export interface PresenceChanges {
  joined: string[];
  left: string[];
}

interface Change {
  /** In the room at the last announcement, as the members know it. */
  wasPresent: boolean;
  /** Left and came back (a new session): the members must hear both. */
  renewed: boolean;
}

export class PresenceBatch {
  readonly #changes = new Map<string, Change>();

  /** `peer` entered the room. */
  joined(peer: string): void {
    const change = this.#changes.get(peer);
    if (change === undefined) this.#changes.set(peer, { wasPresent: false, renewed: false });
    else if (change.wasPresent) change.renewed = true;
  }

  /** `peer` left the room. */
  left(peer: string): void {
    if (!this.#changes.has(peer)) this.#changes.set(peer, { wasPresent: true, renewed: false });
  }

  /** Whether anything happened since the last {@link take}. */
  get pending(): boolean {
    return this.#changes.size > 0;
  }

  /** The net changes since the last call, given who is in the room now; starts a new batch. */
  take(isPresent: (peer: string) => boolean): PresenceChanges {
    const joined: string[] = [];
    const left: string[] = [];
    for (const [peer, change] of this.#changes) {
      const present = isPresent(peer);
      if (change.wasPresent && (!present || change.renewed)) left.push(peer);
      if (present && (!change.wasPresent || change.renewed)) joined.push(peer);
    }
    this.#changes.clear();
    return { joined, left };
  }
}
