// The conformance suite's bundle imports { globSync } from 'fs', which
// Node 22 has and Node 20 (Debian's) does not, so the bundle would not even
// link. Its imports of fs resolve to fs-shim.mjs instead: node:fs as it is,
// with globSync where it is missing. Only the suite's `tier-check` command
// calls globSync, and the e2e never runs it. No other module is touched.
const shim = new URL('./fs-shim.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL &&
      context.parentURL.includes('/node_modules/@modelcontextprotocol/conformance/')) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
