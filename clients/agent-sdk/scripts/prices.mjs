// Copies fluidbox's price table (shared/budget/prices.json) into dist/, so
// that the adapter sizes output tokens with the prices the proxy books.
import { copyFileSync, mkdirSync } from 'node:fs';

const src = new URL('../../../shared/budget/prices.json', import.meta.url);
const dst = new URL('../dist/prices.json', import.meta.url);
mkdirSync(new URL('../dist/', import.meta.url), { recursive: true });
copyFileSync(src, dst);
