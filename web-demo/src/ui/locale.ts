/**
 * The page's language as the libraries it loads read it. A browser started under the POSIX
 * "C" locale reports `navigator.language` as "C", which is no language tag: the chart
 * library formats numbers with `new Intl.NumberFormat(navigator.language)` as it loads, and
 * that throws, so the page would stop at "loading…". Such a page is given the first tag of
 * its languages that Intl takes, else "en-US". Imported before anything else.
 */
function usable(tag: string | undefined): boolean {
  if (tag === undefined || tag === '') return false;
  try {
    new Intl.NumberFormat(tag);
    return true;
  } catch {
    return false;
  }
}

if (typeof navigator !== 'undefined' && !usable(navigator.language)) {
  const tag = (navigator.languages ?? []).find(usable) ?? 'en-US';
  Object.defineProperty(navigator, 'language', { configurable: true, get: () => tag });
}

export {};
