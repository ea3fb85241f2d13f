/** Headless Chromium: Debian's, or BB_CHROMIUM (chromium.mjs). */
export const CHROMIUM: string;
/** The arguments it runs with. */
export const CHROMIUM_ARGS: string[];
/** Content types the static servers send, by file extension. */
export const CONTENT_TYPES: Record<string, string>;
