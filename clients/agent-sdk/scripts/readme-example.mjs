// Type-checks the README's "Govern an Agent SDK app" example against the
// built package and the pinned SDK, as pasted: the first ```ts block of
// that section, compiled strictly in a scratch directory inside this
// package (so that '@fluidbox/claude-agent-sdk' resolves to it).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(join(pkg, '../../README.md'), 'utf8');
const heading = '## Govern an Agent SDK app\n';
const at = readme.indexOf(heading);
if (at < 0) throw new Error(`README.md has no "${heading.trim()}" section`);
let section = readme.slice(at + heading.length);
const next = section.indexOf('\n## ');
if (next >= 0) section = section.slice(0, next);
const open = section.indexOf('```ts\n');
const close = section.indexOf('```', open + 6);
if (open < 0 || close < 0) throw new Error('the README section has no complete ```ts block');
const example = section.slice(open + 6, close);

const dir = mkdtempSync(join(pkg, '.readme-'));
try {
  writeFileSync(join(dir, 'example.mts'), example);
  execFileSync(join(pkg, 'node_modules/.bin/tsc'), ['--ignoreConfig', '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--skipLibCheck', join(dir, 'example.mts')], { stdio: 'inherit' });
  console.log(`README example (${example.trim().split('\n').length} lines) type-checks against the package and the pinned SDK`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
