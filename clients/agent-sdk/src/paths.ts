// The path context of a tool call, as `fluidbox hook claude-code` sends it
// (cmd/fluidbox/hook.go is the reference; docs/api.md, the permission
// request's cwd, resolved_paths and path_kinds).
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
//     a link to something that does not exist yet, to where it points;
//   - a field that cannot be resolved for any other reason (a loop, a
//     component that is not a directory, no permission) is left out, and
//     the given path is still judged. Claude Code's own access to such a
//     path fails the same way.

import { lstat, readlink, realpath, stat } from 'node:fs/promises';
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

/** How many links to nothing realpathThrough follows (Linux's limit is 40). */
const maxLinkHops = 40;

/**
 * realpath(3) of an absolute, clean path, through its deepest existing
 * ancestor when the path does not exist. A link whose target does not
 * exist yet is followed to it: a Write through notes.txt ->
 * .git/hooks/pre-commit creates the hook, so that is the path judged (as
 * the hook does). Any other failure, and a loop, is undefined.
 */
async function realpathThrough(p: string): Promise<string | undefined> {
  for (let hops = 0; hops < maxLinkHops; hops++) {
    const rest: string[] = [];
    let next: string | undefined;
    for (let dir = p; ; ) {
      try {
        const r = await realpath(dir);
        return rest.length === 0 ? r : join(r, ...[...rest].reverse());
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return undefined;
      }
      try {
        if ((await lstat(dir)).isSymbolicLink()) {
          const target = await readlink(dir);
          next = resolve(dirname(dir), target, ...[...rest].reverse());
          break;
        }
      } catch {
        // not there at all: go up
      }
      const parent = dirname(dir);
      if (parent === dir) return undefined;
      rest.push(basename(dir));
      dir = parent;
    }
    p = next;
  }
  return undefined;
}

/** What the sandbox finds at a path (lstat), as fluidbox's path_kinds says it. */
export type PathKind = 'file' | 'dir' | 'absent';

/**
 * For each path field of input, what is there without following a final
 * link: "file", "dir" or "absent"; a link is reported as what it points to
 * (absent when that does not exist), and anything else is left out, which
 * the gate reads as unknown. So a Grep of one file is judged as that file.
 */
export async function pathKinds(input: Record<string, unknown>, cwd: string): Promise<Record<string, PathKind> | undefined> {
  let out: Record<string, PathKind> | undefined;
  for (const f of pathFields) {
    const p = input[f];
    if (typeof p !== 'string' || p === '') continue;
    if (!isAbsolute(p) && cwd === '') continue;
    const full = resolve(cwd || '/', p);
    let kind: PathKind | undefined;
    try {
      let st = await lstat(full);
      if (st.isSymbolicLink()) st = await stat(full);
      kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') kind = 'absent';
    }
    if (kind === undefined) continue;
    out ??= {};
    out[f] = kind;
  }
  return out;
}
