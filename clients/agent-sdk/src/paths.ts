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

import { createHash } from 'node:crypto';
import { lstat, opendir, readlink, realpath, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';

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

/** How many of a Bash line's words that go through a link are sent (the hook's bound too). */
export const maxOperandLinks = 8;

/**
 * For a Bash line, the realpath of every word that may be a path and goes
 * through a symbolic link, keyed as fluidbox's gate looks an operand up
 * by its text: "command@" and the hex sha256 of the word
 * (policy.OperandTextField). The hook finds the operands with fluidbox's
 * own analysis; the adapter has none, so it resolves every word of the
 * line that could be one (a word after quote removal, an option's value
 * after '=', a git revision's path after ':'), which only ever adds paths
 * for the deny side to judge: cat notes.txt, where a pull request
 * committed notes.txt -> .env, is judged as a read of .env. Words holding
 * an expansion or a pattern cannot be resolved here and are judged as
 * written. More than maxOperandLinks such words throw: the line is denied
 * rather than sent half resolved.
 */
export async function resolveOperands(command: unknown, cwd: string): Promise<Record<string, string> | undefined> {
  if (typeof command !== 'string' || command === '' || cwd === '') return undefined;
  // A link above the working directory is not the operand's: compare
  // against the path through the resolved working directory.
  const base = (await realpathThrough(cwd)) ?? cwd;
  let out: Record<string, string> | undefined;
  for (const word of new Set(candidates(command))) {
    const p = resolve(base, word);
    const r = await realpathThrough(p);
    if (r === undefined || r === p) continue;
    out ??= {};
    if (Object.keys(out).length === maxOperandLinks) {
      throw new Error(`the command names more than ${maxOperandLinks} paths through symbolic links, more than the adapter can report to be judged`);
    }
    out['command@' + createHash('sha256').update(word).digest('hex')] = r;
  }
  return out;
}

/**
 * The words of a shell line that may be paths: split as the shell splits
 * them, quotes removed; a word holding an expansion ($, `), a pattern
 * (*, ?, [) or starting with ~ is left out, and so is an option, whose
 * value after '=' is a candidate instead, as is a git revision's path
 * after ':'.
 */
export function candidates(line: string): string[] {
  const out: string[] = [];
  const push = (w: string) => {
    if (w === '' || w.startsWith('~') || /[*?[]/.test(w)) return;
    out.push(w);
    const colon = w.indexOf(':');
    if (colon > 0 && colon < w.length - 1) out.push(w.slice(colon + 1));
  };
  for (const { text, expanded } of words(line)) {
    if (expanded) continue;
    if (text.startsWith('-')) {
      const eq = text.indexOf('=');
      if (eq > 0) push(text.slice(eq + 1));
      continue;
    }
    push(text);
  }
  return out;
}

/** A shell word, quotes removed; expanded: it holds $ or ` outside single quotes. */
interface ShellWord {
  text: string;
  expanded: boolean;
}

/** Splits a line into words on blanks and the shell's operators, removing quotes. */
function words(line: string): ShellWord[] {
  const out: ShellWord[] = [];
  let text = '';
  let expanded = false;
  let inWord = false;
  const end = () => {
    if (inWord) out.push({ text, expanded });
    text = '';
    expanded = false;
    inWord = false;
  };
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\') {
      inWord = true;
      if (i + 1 < line.length && line[i + 1] !== '\n') text += line[i + 1];
      i++;
    } else if (c === "'") {
      inWord = true;
      const close = line.indexOf("'", i + 1);
      if (close < 0) {
        text += line.slice(i + 1);
        i = line.length;
      } else {
        text += line.slice(i + 1, close);
        i = close;
      }
    } else if (c === '"') {
      inWord = true;
      for (i++; i < line.length && line[i] !== '"'; i++) {
        if (line[i] === '\\' && i + 1 < line.length && '$`"\\\n'.includes(line[i + 1]!)) i++;
        else if (line[i] === '$' || line[i] === '`') expanded = true;
        text += line[i];
      }
    } else if (c === '$' || c === '`') {
      inWord = true;
      expanded = true;
      text += c;
    } else if (c === '#' && !inWord) {
      const nl = line.indexOf('\n', i);
      i = nl < 0 ? line.length : nl - 1;
    } else if (/[\s;&|<>()]/.test(c)) {
      end();
    } else {
      inWord = true;
      text += c;
    }
  }
  end();
  return out;
}

/** Bounds of a search report (package tree in fluidbox; the gate refuses more). */
export const reportBounds = { entries: 10000, bytes: 512 << 10, entryBytes: 4096, ms: 2000 } as const;

/** What exists under the directory a Glob searches, as fluidbox's search_report says it. */
export interface SearchReport {
  entries: string[];
  complete: boolean;
}

/**
 * For a Glob, what exists under the directory it searches (its path, else
 * cwd), as the hook sends it (tree.Walk): every name below it that is not
 * a directory, relative and slash-separated, in lexical order; a link is
 * an entry and is never followed below the directory. The walk stops at
 * reportBounds (names, bytes, time) or at a directory it cannot read, and
 * says so (complete: false); the gate then denies a Glob whose tree may
 * hold a denied path. undefined when there is no directory to walk.
 */
export async function globReport(input: Record<string, unknown>, cwd: string, now: () => number = Date.now): Promise<SearchReport | undefined> {
  const p = input['path'];
  if (p !== undefined && typeof p !== 'string') return undefined;
  const dir = typeof p === 'string' && p !== '' ? p : '';
  let root: string;
  if (isAbsolute(dir)) root = resolve(dir);
  else if (cwd !== '') root = resolve(cwd, dir);
  else return undefined;
  let real: string;
  try {
    real = await realpath(root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], complete: true };
    return { entries: [], complete: false };
  }
  const deadline = now() + reportBounds.ms;
  const rep: SearchReport = { entries: [], complete: true };
  let size = 0;
  const add = (rel: string): boolean => {
    if (rep.entries.length === reportBounds.entries || size + rel.length > reportBounds.bytes || rel.length > reportBounds.entryBytes) return false;
    size += rel.length;
    rep.entries.push(rel);
    return true;
  };
  const walk = async (d: string): Promise<boolean> => {
    let names: { name: string; dir: boolean }[];
    try {
      names = [];
      for await (const e of await opendir(d)) names.push({ name: e.name, dir: e.isDirectory() });
    } catch {
      return false;
    }
    // Lexical order by bytes, as Go's filepath.WalkDir.
    names.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
    for (const e of names) {
      if (now() > deadline) return false;
      const full = join(d, e.name);
      if (e.dir) {
        if (!(await walk(full))) return false;
      } else if (!add(relative(real, full).split(sep).join('/'))) {
        return false;
      }
    }
    return true;
  };
  let st;
  try {
    st = await stat(real);
  } catch {
    return { entries: [], complete: false };
  }
  if (!st.isDirectory()) return { entries: ['.'], complete: true };
  rep.complete = await walk(real);
  return rep;
}
