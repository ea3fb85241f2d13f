/**
 * The errors this package throws: {@link BbError} for a failure the C library reported,
 * {@link BbLoadError} when bb.wasm cannot be fetched, compiled or linked, and
 * {@link BbExitError} when the C code called exit() or abort().
 */

/** The C library's error codes (BB_ERR_*): 0 is success, failures are negative. */
export const BbErrorCode = {
  /** The caller broke a documented precondition (a freed or unknown handle, ...). */
  InvalidArgument: -1,
  /** Input bytes are not what they claim to be. */
  Malformed: -2,
  /** Well-formed, but not something this build handles. */
  Unsupported: -3,
  /** A named thing does not exist. */
  NotFound: -4,
  /** A named thing already exists. */
  Exists: -5,
  /** A size, depth or count cap was exceeded. */
  Limit: -6,
  /** Reading or writing a file failed. */
  Io: -7,
  /** A value has the wrong type or shape. */
  Type: -8,
  /** Well formed, but not admitted (a join token for another peer, room or operator, expired, or forged). */
  Denied: -9,
  /** Codes at or below this leave the object they came from unusable. */
  Fatal: -500,
  /** The allocator ran out of memory. */
  NoMem: -501,
} as const;

/** One of the known codes; {@link BbError.code} may also hold a code newer than this package. */
export type BbErrorCode = (typeof BbErrorCode)[keyof typeof BbErrorCode];

/** The name of a code in {@link BbErrorCode}, or `code <n>` for one this package does not know. */
export function bbErrorCodeName(code: number): string {
  for (const [name, value] of Object.entries(BbErrorCode)) {
    if (value === code) return name;
  }
  return `code ${code}`;
}

/** A failure reported by the C library: its negative code and its own message. */
export class BbError extends Error {
  override readonly name = 'BbError';
  /** The negative BB_ERR_* code. */
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }

  /** The code's name, e.g. `Malformed`. */
  get codeName(): string {
    return bbErrorCodeName(this.code);
  }

  /** True when the object that failed can no longer be used. */
  get fatal(): boolean {
    return this.code <= BbErrorCode.Fatal;
  }
}

/** bb.wasm could not be read, fetched, compiled or linked, or is not the module this package expects. */
export class BbLoadError extends Error {
  override readonly name = 'BbLoadError';
}

/**
 * The C code ended the module through exit() or abort() (WASI `proc_exit`). That is a bug
 * in the library, never a reaction to bad input; the module instance is unusable after it.
 */
export class BbExitError extends Error {
  override readonly name = 'BbExitError';
  readonly exitCode: number;

  constructor(exitCode: number) {
    super(`bb.wasm called exit(${exitCode}); this instance can no longer be used`);
    this.exitCode = exitCode;
  }
}
