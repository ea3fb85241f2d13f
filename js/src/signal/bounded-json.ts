/**
 * JSON text measured before it is parsed: how deep its arrays and objects nest and how
 * many values it holds. A message past either bound is refused without being built, so
 * nothing that handles a parsed message (re-serialising it to relay it, walking it)
 * meets a value deeper or larger than the bounds.
 */

export interface JsonBounds {
  /** Arrays and objects nested in each other, the outermost counting 1. */
  readonly maxDepth: number;
  /** Values of every kind (each array, object, member name, string, number, literal) counting 1. */
  readonly maxValues: number;
}

const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const COLON = 0x3a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Parses `text` as JSON within `bounds`: the value, or why not (a bound passed, or not
 * JSON). Linear in the text, and never recursive: any depth is measured safely.
 */
export function parseBoundedJson(text: string, bounds: JsonBounds): { value: unknown } | { error: string } {
  let depth = 0;
  // a value starts the text and follows each '[', ',' and ':' (an empty array or object
  // counts one too many, which only errs on the safe side)
  let values = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // skip the string: inside one, brackets and commas are text
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > bounds.maxDepth) return { error: `nested deeper than ${bounds.maxDepth} arrays and objects` };
      values++;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    } else if (c === COMMA || c === COLON) {
      values++;
    }
    if (values > bounds.maxValues) return { error: `more than ${bounds.maxValues} values` };
  }
  try {
    return { value: JSON.parse(text) };
  } catch {
    return { error: 'not JSON' };
  }
}
