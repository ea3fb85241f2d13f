/**
 * How much of what a socket sent the server holds unfinished: the WebSocket frames
 * (RFC 6455, section 5.2) of a message that has not ended yet, read from the bytes as
 * they arrive, before the WebSocket library assembles them. The library keeps views of
 * the buffers the bytes came in, so an unfinished message costs every buffer it has a
 * byte in, whole — a chunk of 64 KiB that ends with a message's first byte costs 64 KiB
 * — and, for every piece (each buffer and each fragment), an object of its own: a message
 * dripped a byte at a time costs far more than its length, and is counted so.
 */

/** What one piece of an unfinished message (a buffer or a fragment) costs beside its bytes. */
export const PIECE_BYTES = 256;

export class FrameMeter {
  /** Header bytes of the current frame seen so far (a header is 2–14 bytes). */
  readonly #header: number[] = [];
  /** Payload bytes of the current frame still to come; -1 while its header is read. */
  #left = -1;
  #final = false;
  #control = false;
  /** Bytes of the current frame so far, header included. */
  #frame = 0;
  /** Bytes of the earlier frames of an unfinished fragmented message. */
  #fragments = 0;
  /** The buffers the unfinished message has bytes in, whole, with what each piece of it costs. */
  #held = 0;

  /** What the unfinished input costs. */
  get held(): number {
    return this.#held;
  }

  /** Takes the next bytes the socket delivered. */
  read(chunk: Uint8Array): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.#left < 0) {
        this.#header.push(chunk[i++]!);
        this.#frame++;
        this.#parseHeader();
      } else {
        const take = Math.min(this.#left, chunk.length - i);
        i += take;
        this.#left -= take;
        this.#frame += take;
      }
      if (this.#left === 0) this.#endFrame();
    }
    if (this.#fragments + this.#frame > 0) this.#held += Math.max(chunk.length, chunk.buffer.byteLength) + PIECE_BYTES;
  }

  /** Once the header is whole, how long the payload is. */
  #parseHeader(): void {
    const h = this.#header;
    if (h.length < 2) return;
    const short = h[1]! & 0x7f;
    const lengthBytes = short === 126 ? 2 : short === 127 ? 8 : 0;
    const size = 2 + lengthBytes + (h[1]! & 0x80 ? 4 : 0);
    if (h.length < size) return;
    let length = short;
    if (lengthBytes > 0) {
      length = 0;
      for (let k = 2; k < 2 + lengthBytes; k++) length = length * 256 + h[k]!;
    }
    this.#final = (h[0]! & 0x80) !== 0;
    this.#control = (h[0]! & 0x08) !== 0;
    this.#left = length;
    h.length = 0;
  }

  /** A frame ended: a control frame is handled at once, the last frame of a message ends it. */
  #endFrame(): void {
    if (!this.#control) {
      if (this.#final) {
        this.#fragments = 0;
      } else {
        this.#fragments += this.#frame;
        this.#held += PIECE_BYTES;
      }
    }
    this.#frame = 0;
    this.#left = -1;
    if (this.#fragments === 0) this.#held = 0; // nothing unfinished: no buffer is kept
  }
}
