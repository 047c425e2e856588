// The path context of a tool call, as `fluidbox hook claude-code` sends it
// (cmd/fluidbox/hook.go is the reference; docs/api.md, the permission
// request's cwd and resolved_paths).
//
// The gate judges a file tool's path as given and as the sandbox resolves
// it, and allows the call only if both are allowed: a symlink a pull
// request committed (notes.txt -> .env) is judged by what it points at.
// The adapter runs beside Claude Code, on the same filesystem, so it
// resolves the paths itself, the way the hook does:
//   - the fields file_path, notebook_path and path, when they are
//     non-empty strings (Glob's pattern and Grep's glob are globs the gate
//     judges as given);
//   - a relative path against the call's cwd, and not at all without one;
//   - every symbolic link followed (realpath(3));
//   - a path that does not exist yet (a Write's new file) through its
//     deepest existing ancestor: the ancestor resolved, the rest appended;
//   - a field that cannot be resolved for any other reason (a loop, a
//     component that is not a directory, no permission) is left out, and
//     the given path is still judged. Claude Code's own access to such a
//     path fails the same way.

import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';

/** The input fields of Claude Code's file tools that name one path. */
export const pathFields = ['file_path', 'notebook_path', 'path'] as const;

/**
 * The cwd fluidbox is sent: an absolute directory, cleaned (no trailing
 * slash, no "." or ".." parts), or "" when dir is not absolute (sent as
 * nothing, as the hook does).
 */
export function cleanCwd(dir: unknown): string {
  return typeof dir === 'string' && isAbsolute(dir) ? resolve(dir) : '';
}

/**
 * For each path field of input, the path with every symbolic link
 * resolved; undefined when no field resolved. cwd is absolute or "".
 */
export async function resolvePaths(input: Record<string, unknown>, cwd: string): Promise<Record<string, string> | undefined> {
  let out: Record<string, string> | undefined;
  for (const f of pathFields) {
    const p = input[f];
    if (typeof p !== 'string' || p === '') continue;
    if (!isAbsolute(p) && cwd === '') continue;
    const r = await realpathThrough(resolve(cwd || '/', p));
    if (r === undefined) continue;
    out ??= {};
    out[f] = r;
  }
  return out;
}

/**
 * realpath(3) of an absolute, clean path, through its deepest existing
 * ancestor when the path does not exist (ENOENT, which includes a symlink
 * whose target does not exist). Any other failure is undefined.
 */
async function realpathThrough(p: string): Promise<string | undefined> {
  const rest: string[] = [];
  for (let dir = p; ; ) {
    try {
      const r = await realpath(dir);
      return rest.length === 0 ? r : join(r, ...rest.reverse());
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return undefined;
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    rest.push(basename(dir));
    dir = parent;
  }
}
