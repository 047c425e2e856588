// node:fs, plus globSync where Node lacks it (see hooks.mjs).
import * as fs from 'node:fs';

export * from 'node:fs';
export default fs.default ?? fs;
export const globSync = fs.globSync ?? function globSync() {
  throw new Error('fs.globSync needs Node 22; the conformance e2e does not use it');
};
