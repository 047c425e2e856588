// The fluidbox HTTP protocol this package speaks, kept small enough to port
// (a Python adapter would need exactly these three calls):
//
//   GET  /v1/sessions/{id}                    the run: its frozen tools and budget
//   POST /v1/sessions/{id}/permission         may this sandbox tool call run?
//   POST /v1/sessions/{id}/tools/call         decide and execute a brokered call
//
// All three take the run's session token as a bearer token. A permission or
// tools/call request is idempotent by (run, tool_call_id): asking again with
// the same id re-attaches to the same decision or pending approval and
// records nothing new, which is what makes the long-poll loop and the
// retries below safe. 503 (the gate could not decide; nothing recorded), 429
// and an unreachable server are retried with backoff until the caller's
// deadline; every other failure, a pending answer at the deadline and any
// answer this package does not know are a deny.

/** The gate's answer to one tool call (docs/openapi.yaml, Decision). */
export interface Answer {
  decision: 'allow' | 'deny' | 'pending';
  source?: string;
  reason?: string;
  rule_id?: string;
  approval_id?: string;
  verdict?: string;
  rewritten_verdict?: string;
  /** On an allow: the input the tool must run with instead (a narrowed search). */
  updated_input?: Record<string, unknown>;
}

/** The answer of tools/call: a Decision, and on allow the upstream's result. */
export interface CallAnswer extends Answer {
  result?: { content?: unknown[]; isError?: boolean; structuredContent?: unknown };
  latency_ms?: number;
}

/** A run as GET /v1/sessions/{id} shows it, as far as this package reads it. */
export interface Run {
  id: string;
  status: string;
  autonomous: boolean;
  trust_tier: string;
  tools: string[];
  budget: { limit_usd: number; available_usd: number; reserved_usd: number; spent_usd: number };
}

/** Why a call to fluidbox did not produce an answer. Never carries the token. */
export class GateError extends Error {
  readonly status: number | undefined;
  readonly code: string | undefined;
  constructor(message: string, status?: number, code?: string) {
    super(message);
    this.name = 'GateError';
    this.status = status;
    this.code = code;
  }
}

/** Starts every session token (a run's, good for that run only). */
export const sessionTokenPrefix = 'fbx_sess_';
const sessionToken = new RegExp(`^${sessionTokenPrefix}[A-Za-z0-9_-]+$`);

/** The longest wait the API accepts on one request (wait_seconds). */
export const maxWaitSeconds = 25;

/** Extra time a long poll's request gets beyond its wait. */
const pollMarginMs = 15_000;
/** The deadline of a request that does not wait on the server. */
const requestTimeoutMs = 30_000;
/** Bounds a JSON answer read into memory. */
const maxResponseBytes = 8 << 20;

export interface GateConfig {
  /** The control plane's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  sessionId: string;
  /**
   * The run's session token (fbx_sess_...). Anything else is refused: it
   * becomes Claude Code's API key and FLUIDBOX_SESSION_TOKEN.
   */
  token: string;
  /**
   * How long a call's first ask is retried while fluidbox fails with 503,
   * 429 or no answer at all, in milliseconds (default 10000); then the call
   * is denied.
   */
  retryWindowMs?: number;
  /** Replaces the global fetch (tests, or a proxy-aware fetch). */
  fetch?: typeof fetch;
  /**
   * The W3C traceparent of the caller's current span, asked before each
   * request (e.g. from @opentelemetry/api's propagation.inject), so the
   * gate's decision and a brokered call join the agent's trace. A value
   * that is not a well-formed traceparent is not sent.
   */
  traceparent?: () => string | undefined;
}

/** A W3C traceparent of version 00, the only one defined. */
const traceparentRE = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Counts what the client did, for callers that measure it. */
export interface GateStats {
  requests: number;
  retries: number;
}

/** One tool call, as fluidbox names its fields. */
export interface ToolCall {
  tool_call_id: string;
  tool_name: string;
  input: Record<string, unknown>;
  /** The runner's working directory, absolute; relative input paths resolve against it. */
  cwd?: string;
  /** Path field -> the path the sandbox resolved it to (symlinks followed). */
  resolved_paths?: Record<string, string>;
  /** Path field -> what the sandbox found there: "file", "dir" or "absent" (lstat). */
  path_kinds?: Record<string, string>;
  /** With a Glob: what exists under the directory it searches (paths.ts, globReport). */
  search_report?: { entries: string[]; complete: boolean };
  /** The subagent making the call, from Claude Code's hook input; absent for the main agent. */
  agent_id?: string;
  agent_type?: string;
}

export class Gate {
  readonly base: URL;
  readonly sessionId: string;
  readonly stats: GateStats = { requests: 0, retries: 0 };
  /** How long failures of a first ask are retried (503, 429, unreachable). */
  readonly retryWindowMs: number;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  readonly #traceparent?: () => string | undefined;
  /** The base URL's path without a trailing slash ("" at the root). */
  readonly #path: string;

  constructor(cfg: GateConfig) {
    let u: URL;
    try {
      u = new URL(cfg.url);
    } catch {
      throw new GateError(`fluidbox url ${JSON.stringify(cfg.url)} is not a URL`);
    }
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username !== '' || u.password !== '') {
      throw new GateError('fluidbox url must be http:// or https:// without credentials in it');
    }
    if (!/^ses_[A-Za-z0-9_-]+$/.test(cfg.sessionId ?? '')) {
      throw new GateError('sessionId must be a fluidbox run id (ses_...)');
    }
    // Only a run's session token belongs beside Claude Code: it becomes
    // its ANTHROPIC_API_KEY and FLUIDBOX_SESSION_TOKEN, and is good for
    // that one run. The admin token (or the runner token) there would let
    // the sandbox approve its own calls, so, as the hook does, the adapter
    // refuses it before sending or exporting anything. A session token is
    // the prefix and base64url; nothing else may ride in a header.
    if (typeof cfg.token !== 'string' || !sessionToken.test(cfg.token)) {
      throw new GateError(`token is not a session token (${sessionTokenPrefix}...): only a run's session token belongs in the sandbox, never the admin token or the runner token`);
    }
    u.search = '';
    u.hash = '';
    this.#path = u.pathname.replace(/\/+$/, '');
    u.pathname = this.#path || '/';
    this.base = u;
    this.sessionId = cfg.sessionId;
    this.#token = cfg.token;
    this.#fetch = cfg.fetch ?? fetch;
    this.#traceparent = cfg.traceparent;
    this.retryWindowMs = cfg.retryWindowMs ?? 10_000;
  }

  /** The API's base URL as given, without a trailing slash. */
  baseUrl(): string {
    return this.base.origin + this.#path;
  }

  /** The run's model proxy base URL (ANTHROPIC_BASE_URL) on this API. */
  modelUrl(): string {
    return this.#url('/model').toString();
  }

  #url(suffix: string, wait?: number): URL {
    const u = new URL(this.base.toString());
    u.pathname = `${this.#path}/v1/sessions/${encodeURIComponent(this.sessionId)}${suffix}`;
    if (wait !== undefined && wait > 0) u.searchParams.set('wait_seconds', String(wait));
    return u;
  }

  /** GET the run. Transient failures are retried until deadline. */
  async run(deadline: number, signal?: AbortSignal): Promise<Run> {
    const body = await this.#retrying(deadline, signal, () => this.#request('GET', this.#url(''), undefined, requestTimeoutMs, signal));
    const r = body as Partial<Run>;
    if (typeof r !== 'object' || r === null || !Array.isArray(r.tools) || typeof r.budget?.available_usd !== 'number') {
      throw new GateError('GET /v1/sessions/{id}: the answer is not a run');
    }
    return r as Run;
  }

  /**
   * Asks the gate about one sandbox tool call and waits through pending with
   * long polls until a final answer or the deadline (a Date.now() value).
   * Returns the last answer, which is pending when the deadline passed.
   * Throws GateError when fluidbox gave no usable answer.
   */
  async permission(call: ToolCall, deadline: number, signal?: AbortSignal): Promise<Answer> {
    return this.#decide('/permission', call, deadline, signal);
  }

  /** Decides and, on allow, executes a brokered call (tools/call). */
  async callTool(call: ToolCall, deadline: number, signal?: AbortSignal): Promise<CallAnswer> {
    return this.#decide('/tools/call', call, deadline, signal) as Promise<CallAnswer>;
  }

  async #decide(suffix: string, call: ToolCall, deadline: number, signal?: AbortSignal): Promise<Answer> {
    let last: Answer | undefined;
    let pendingBackoff = 250;
    for (;;) {
      const asked = Date.now();
      const left = deadline - asked;
      // The first ask waits too: a pending answer comes back after the wait
      // instead of at once, which saves a round trip.
      const wait = Math.max(0, Math.min(maxWaitSeconds, Math.floor(left / 1000) - 1));
      // (wait 0 asks for an immediate answer; the loop then backs off.)
      // Before any answer, a server that keeps failing is given
      // retryWindowMs, not the whole deadline: nobody is deciding yet.
      // Once an approval is pending, a human may be, so the loop keeps
      // trying until the deadline.
      const retryUntil = last === undefined ? Math.min(deadline, asked + this.retryWindowMs) : deadline;
      const ans = await this.#retrying(retryUntil, signal, () =>
        this.#request('POST', this.#url(suffix, wait), call, wait * 1000 + pollMarginMs, signal),
      ).catch((err: unknown) => {
        // A transient failure while an approval is pending leaves the
        // approval pending: answer that, and the caller denies.
        if (last !== undefined && err instanceof GateError && err.code === 'deadline') return last;
        throw err;
      });
      const a = checkAnswer(ans);
      if (a.decision !== 'pending') return a;
      last = a;
      if (deadline - Date.now() < 1000 || signal?.aborted) return a;
      // A server that answered pending before the wait was over (or was
      // asked not to wait) is not asked again at once.
      if (Date.now() - asked < Math.max(wait, 1) * 1000) {
        await sleep(Math.min(pendingBackoff, deadline - Date.now()), signal);
        pendingBackoff = Math.min(pendingBackoff * 2, 5000);
      }
    }
  }

  /** Runs one request, retrying transient failures with backoff until deadline. */
  async #retrying(deadline: number, signal: AbortSignal | undefined, once: () => Promise<unknown>): Promise<unknown> {
    let backoff = 250;
    for (;;) {
      try {
        return await once();
      } catch (err) {
        if (!(err instanceof GateError) || !transient(err)) throw err;
        const pause = Math.min(backoff, deadline - Date.now());
        if (pause <= 0 || signal?.aborted) {
          throw new GateError(`no answer from fluidbox before the deadline (last: ${err.message})`, err.status, 'deadline');
        }
        this.stats.retries++;
        await sleep(pause, signal);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  #traceHeader(): Record<string, string> {
    const tp = this.#traceparent?.();
    return typeof tp === 'string' && traceparentRE.test(tp) ? { traceparent: tp } : {};
  }

  async #request(method: string, u: URL, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    this.stats.requests++;
    const timeout = AbortSignal.timeout(timeoutMs);
    const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const what = `${method} ${u.pathname}`;
    let resp: Response;
    try {
      resp = await this.#fetch(u, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...this.#traceHeader(),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: sig,
        redirect: 'error',
      });
    } catch (err) {
      if (signal?.aborted) throw new GateError(`${what}: the call was cancelled`, undefined, 'aborted');
      throw new GateError(`cannot reach fluidbox at ${this.base.origin} (${what}): ${errText(err)}`, undefined, 'unreachable');
    }
    const text = await readBounded(resp).catch((err: unknown) => {
      throw new GateError(`${what}: reading the answer: ${errText(err)}`, undefined, 'unreachable');
    });
    if (resp.status < 200 || resp.status > 299) {
      let code = 'http_error';
      let message = `the server answered ${resp.status} without fluidbox's error body`;
      try {
        const e = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
        if (typeof e.error?.code === 'string') {
          code = e.error.code;
          message = typeof e.error.message === 'string' ? e.error.message : code;
        }
      } catch {
        // not fluidbox's shape: keep the generic text
      }
      throw new GateError(`${what}: ${resp.status} ${code}: ${clean(message, 300)}`, resp.status, code);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new GateError(`${what}: the answer is not JSON`, resp.status);
    }
  }
}

/** A failure that asking again may cure. */
function transient(err: GateError): boolean {
  if (err.code === 'unreachable') return true;
  return err.status === 503 || err.status === 429 || err.status === 502 || err.status === 504;
}

function checkAnswer(v: unknown): Answer {
  const a = v as Partial<Answer> | null;
  if (typeof a !== 'object' || a === null) throw new GateError('the gate\'s answer is not an object');
  if (a.decision !== 'allow' && a.decision !== 'deny' && a.decision !== 'pending') {
    throw new GateError(`the gate answered an unknown decision ${JSON.stringify(clean(String(a.decision), 40))}`);
  }
  for (const k of ['source', 'reason', 'rule_id', 'approval_id'] as const) {
    if (a[k] !== undefined && typeof a[k] !== 'string') throw new GateError(`the gate's answer has a non-string ${k}`);
  }
  return a as Answer;
}

async function readBounded(resp: Response): Promise<string> {
  if (!resp.body) return '';
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > maxResponseBytes) {
      await reader.cancel();
      throw new Error(`the answer is over ${maxResponseBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

function errText(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

/** Printable, bounded text from the server, for a reason the model reads. */
export function clean(s: string, max: number): string {
  const t = s.replace(/[\u0000-\u001f\u007f]/g, ' ');
  return t.length > max ? `${t.slice(0, max)}…` : t;
}
