// @fluidbox/claude-agent-sdk: govern a Claude Agent SDK app with fluidbox.
//
// withFluidbox(options, { url, sessionId, token }) returns Agent SDK options
// for query() in which:
//   - every tool call is asked of fluidbox's gate by a PreToolUse hook
//     callback with onFailure 'block': a hook that throws, times out or gets
//     no answer blocks the call. Claude Code asks PreToolUse hooks for every
//     call; canUseTool alone is not enough, because Claude Code calls it only
//     when its own rules say "ask" (reads and commands it deems read-only run
//     without it). canUseTool is wired to the same gate for any call that
//     still reaches it. Each ask carries the call's cwd and its file paths
//     resolved with symlinks followed (paths.ts), as the Claude Code hook
//     sends them: a Bash line's words that go through links too, and for a
//     Glob what exists under the directory it searches.
//   - the token must be a session token (fbx_sess_...): the admin or runner
//     token is refused before anything is sent or exported.
//   - permissionMode is 'dontAsk': a call the hook did not allow is refused,
//     never prompted for. Options that would open another way in are refused
//     with an error (FluidboxOptionsError), not dropped silently.
//   - the model traffic goes through the run's model proxy with the session
//     token as the API key, in a complete environment built here (the SDK's
//     env option replaces the process environment).
//   - tools outside the run's frozen set are disallowed up front, the output
//     token limit fits the run's budget, and the run's brokered tools are an
//     in-process MCP server whose handlers call tools/call: one decision and
//     one execution per call, inside fluidbox.

import { resolve } from 'node:path';

import { createSdkMcpServer, tool, BUILTIN_TOOL_NAMES } from '@anthropic-ai/claude-agent-sdk';
import type {
  CanUseTool,
  HookCallback,
  HookCallbackMatcher,
  HookEvent,
  McpServerConfig,
  Options,
  PermissionResult,
  PreToolUseHookInput,
  SyncHookJSONOutput,
} from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';

import { Gate, GateError, clean, type Answer, type CallAnswer, type GateConfig, type Run, type ToolCall } from './gate.js';
import { runEnvironment } from './env.js';
import { cleanCwd, globReport, pathKinds, resolveOperands, resolvePaths } from './paths.js';
import { outputTokens } from './budget.js';

export { Gate, GateError, sessionTokenPrefix, type Answer, type CallAnswer, type Run, type ToolCall } from './gate.js';
export { outputTokens, outputRate } from './budget.js';

/** How to reach the run this query belongs to. */
export interface FluidboxConfig extends GateConfig {
  /**
   * The model proxy's base URL (ANTHROPIC_BASE_URL). Default:
   * `${url}/v1/sessions/${sessionId}/model`. On AWS the proxy is the broker
   * function's URL (stack output ModelProxyUrl) plus the same path.
   */
  modelUrl?: string;
  /**
   * How long one tool call may wait for a human (a pending approval), in
   * milliseconds, from when Claude Code asks. Default 540000 (9 minutes).
   * At the deadline the call is denied; the approval stays pending.
   */
  decisionTimeoutMs?: number;
  /**
   * The output token limit per model request. Default: what the run's
   * available budget covers at the model's output price (see outputTokens),
   * at most Claude Code's own default of 32000.
   */
  maxOutputTokens?: number;
  /**
   * Called after each decision, for metrics: the tool, fluidbox's answer
   * (or the error) and how long the gate took.
   */
  onDecision?: (event: DecisionEvent) => void;
}

/** One decision the adapter obtained, reported through onDecision. */
export interface DecisionEvent {
  via: 'hook' | 'canUseTool' | 'tools/call';
  toolName: string;
  toolUseId: string;
  decision: 'allow' | 'deny';
  reason: string;
  answer?: Answer;
  error?: string;
  ms: number;
}

/** An option that would let a tool call past fluidbox. */
export class FluidboxOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FluidboxOptionsError';
  }
}

const defaultDecisionTimeoutMs = 540_000;
const maxDecisionTimeoutMs = 24 * 3600_000;

// Options refused outright: each is a way for a call to run without the
// gate's allow, or to change what runs after the gate decided.
const refused: Partial<Record<keyof Options, string>> = {
  allowDangerouslySkipPermissions: 'it exists only to bypass permission checks',
  canUseTool: 'withFluidbox wires canUseTool to the gate itself',
  permissionPromptToolName: 'permission prompts would go to an MCP tool instead of fluidbox',
  allowedTools: 'it pre-approves tools; under fluidbox the gate allows each call',
  toolAliases: 'it renames tool calls after the gate has seen their names',
  extraArgs: 'raw CLI flags can change the permission mode, settings and hooks',
  executableArgs: 'runtime flags can preload code into Claude Code',
  plugins: 'plugins bring hooks, agents and commands of their own',
};

// Hook events whose callbacks could allow or rewrite a tool call: only
// fluidbox answers them.
const gatedEvents: HookEvent[] = ['PreToolUse', 'PermissionRequest'];

/**
 * Returns options for query() that put every tool call of the run
 * `cfg.sessionId` under fluidbox. It reads the run once (its tools and
 * budget). Throws FluidboxOptionsError for options that would bypass
 * fluidbox, and GateError when the run cannot be read.
 */
export async function withFluidbox(options: Options, cfg: FluidboxConfig): Promise<Options> {
  checkOptions(options);
  const gate = new Gate(cfg);
  const timeoutMs = cfg.decisionTimeoutMs ?? defaultDecisionTimeoutMs;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1000 || timeoutMs > maxDecisionTimeoutMs) {
    throw new FluidboxOptionsError(`decisionTimeoutMs must be a whole number of milliseconds from 1000 to ${maxDecisionTimeoutMs}`);
  }
  const run = await gate.run(Date.now() + 30_000, options.abortController?.signal);
  if (run.status === 'ended') throw new GateError(`run ${run.id} has ended`);

  const frozen = new Set(run.tools);
  const connections = brokered(run.tools);
  for (const name of Object.keys(options.mcpServers ?? {})) {
    if (connections.has(name)) {
      throw new FluidboxOptionsError(`mcpServers.${name}: the run has a connection of that name; its tools come from fluidbox (tools/call), not from another server`);
    }
  }

  const maxTokens = cfg.maxOutputTokens ?? outputTokens(run.budget.available_usd, options.model);
  if (!Number.isInteger(maxTokens) || maxTokens < 1) {
    throw new FluidboxOptionsError(`the run's available budget ($${run.budget.available_usd}) does not cover one model response; raise its limit or set maxOutputTokens`);
  }

  // Claude Code runs in options.cwd (the SDK's default: this process's).
  // A hook input names the call's own cwd; canUseTool's does not.
  const sessionCwd = resolve(options.cwd ?? process.cwd());
  const decider = new Decider(gate, timeoutMs, cfg.onDecision, connections, sessionCwd);
  const matcher: HookCallbackMatcher = {
    hooks: [decider.hook],
    onFailure: 'block',
    // Claude Code's own limit on the callback, beyond fluidbox's deadline so
    // that it is the adapter that answers (deny), not the timeout.
    timeout: Math.ceil(timeoutMs / 1000) + 60,
  };
  const hooks: Options['hooks'] = { ...options.hooks, PreToolUse: [matcher] };

  const mcpServers: Record<string, McpServerConfig> = { ...options.mcpServers };
  for (const [name, tools] of connections) {
    mcpServers[name] = decider.server(name, tools, timeoutMs);
  }

  // The base set of built-in tools: what the run froze, narrowed further by
  // the caller's own list if it gave one. Everything else the SDK knows is
  // disallowed, so the model is not even offered it.
  const builtin = new Set<string>(BUILTIN_TOOL_NAMES);
  let base = [...builtin].filter((t) => frozen.has(t));
  if (Array.isArray(options.tools)) base = base.filter((t) => (options.tools as string[]).includes(t));
  const disallowed = new Set([...(options.disallowedTools ?? []), ...[...builtin].filter((t) => !frozen.has(t))]);

  return {
    ...options,
    env: runEnvironment(options.env, {
      fluidboxUrl: gate.baseUrl(),
      sessionId: cfg.sessionId,
      token: cfg.token,
      modelUrl: cfg.modelUrl ?? gate.modelUrl(),
      maxOutputTokens: maxTokens,
    }),
    permissionMode: 'dontAsk',
    canUseTool: decider.canUseTool,
    hooks,
    mcpServers,
    tools: base,
    disallowedTools: [...disallowed].sort(),
    settingSources: options.settingSources ?? [],
  };
}

function checkOptions(options: Options): void {
  if (typeof options !== 'object' || options === null) throw new FluidboxOptionsError('options must be an object');
  if (options.permissionMode !== undefined && options.permissionMode !== 'dontAsk') {
    throw new FluidboxOptionsError(`permissionMode ${JSON.stringify(options.permissionMode)}: under fluidbox it is 'dontAsk' (a call the gate did not allow is refused, never prompted for or bypassed)`);
  }
  for (const [key, why] of Object.entries(refused)) {
    const v = (options as Record<string, unknown>)[key];
    if (v !== undefined && v !== false && !(Array.isArray(v) && v.length === 0) && !(isPlainObject(v) && Object.keys(v).length === 0)) {
      throw new FluidboxOptionsError(`${key} is not allowed with fluidbox: ${why}`);
    }
  }
  for (const ev of gatedEvents) {
    if ((options.hooks?.[ev]?.length ?? 0) > 0) {
      throw new FluidboxOptionsError(`hooks.${ev} is not allowed with fluidbox: only the gate answers whether a tool call runs, and with what input`);
    }
  }
  if (options.settings !== undefined) {
    if (typeof options.settings === 'string') {
      throw new FluidboxOptionsError('settings as a file path is not allowed with fluidbox: pass an object, so that it can be checked');
    }
    for (const key of ['permissions', 'hooks', 'disableAllHooks', 'allowManagedHooksOnly', 'enabledPlugins', 'apiKeyHelper', 'env'] as const) {
      if ((options.settings as Record<string, unknown>)[key] !== undefined) {
        throw new FluidboxOptionsError(`settings.${key} is not allowed with fluidbox: it changes who decides tool calls or where model traffic goes`);
      }
    }
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The run's brokered tools by connection: mcp__<connection>__<tool>.
 * Connection names contain no "__", so the split is unambiguous.
 */
export function brokered(tools: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const name of tools) {
    const m = /^mcp__([A-Za-z0-9_-]+?)__(.+)$/.exec(name);
    if (!m) continue;
    const [, conn, t] = m as unknown as [string, string, string];
    out.set(conn, [...(out.get(conn) ?? []), t]);
  }
  return out;
}

/** Asks the gate, and turns its answers into what the SDK takes. */
class Decider {
  readonly #gate: Gate;
  readonly #timeoutMs: number;
  readonly #onDecision: ((e: DecisionEvent) => void) | undefined;
  readonly #connections: Map<string, string[]>;
  /** Claude Code's working directory for the session, absolute. */
  readonly #cwd: string;

  constructor(gate: Gate, timeoutMs: number, onDecision: ((e: DecisionEvent) => void) | undefined, connections: Map<string, string[]>, cwd: string) {
    this.#gate = gate;
    this.#timeoutMs = timeoutMs;
    this.#onDecision = onDecision;
    this.#connections = connections;
    this.#cwd = cwd;
  }

  /**
   * Asks about one sandbox call in cwd (absolute); never throws: every
   * failure is a deny.
   */
  async #ask(via: DecisionEvent['via'], toolName: string, toolUseId: string, input: unknown, cwd: string, signal?: AbortSignal, agent?: { agent_id?: string; agent_type?: string }): Promise<{ allow: boolean; reason: string; updatedInput?: Record<string, unknown> }> {
    const start = performance.now();
    const report = (allow: boolean, reason: string, answer?: Answer, error?: string) => {
      try {
        this.#onDecision?.({ via, toolName, toolUseId, decision: allow ? 'allow' : 'deny', reason, answer, error, ms: performance.now() - start });
      } catch {
        // a metrics callback must not change the decision
      }
      return { allow, reason };
    };
    if (typeof toolUseId !== 'string' || toolUseId === '' || typeof toolName !== 'string' || toolName === '') {
      return report(false, 'fluidbox denied this call: Claude Code gave no tool name or tool_use_id to ask about');
    }
    const obj = input === undefined || input === null ? {} : input;
    if (!isPlainObject(obj)) return report(false, 'fluidbox denied this call: its input is not a JSON object');
    try {
      // The gate judges each path as given and as resolved here (symlinks
      // followed), as the hook sends them (paths.ts).
      const call: ToolCall = { tool_call_id: toolUseId, tool_name: toolName, input: obj, cwd };
      // A subagent's calls are decided and recorded as its own.
      if (typeof agent?.agent_id === 'string' && agent.agent_id !== '') call.agent_id = agent.agent_id;
      if (typeof agent?.agent_type === 'string' && agent.agent_type !== '') call.agent_type = agent.agent_type;
      const resolved = await resolvePaths(obj, cwd);
      if (resolved !== undefined) call.resolved_paths = resolved;
      const kinds = await pathKinds(obj, cwd);
      if (kinds !== undefined) call.path_kinds = kinds;
      if (toolName === 'Bash') {
        // A Bash line's words that go through links, as the hook resolves
        // its operands (paths.ts); more than the gate takes is a deny.
        const links = await resolveOperands(obj['command'], cwd);
        if (links !== undefined) call.resolved_paths = { ...call.resolved_paths, ...links };
      }
      if (toolName === 'Glob') {
        // Glob cannot be narrowed: what exists where it searches decides.
        const rep = await globReport(obj, cwd);
        if (rep !== undefined) call.search_report = rep;
      }
      const ans = await this.#gate.permission(call, Date.now() + this.#timeoutMs, signal);
      if (ans.decision === 'allow' && ans.updated_input !== undefined && ans.updated_input !== null) {
        // The allow holds only with the narrowed input: one that is not an
        // object Claude Code can run means the call does not run.
        if (!isPlainObject(ans.updated_input)) {
          return report(false, 'fluidbox denied this call: the control plane allowed it with an updated input that is not a JSON object', ans);
        }
        return { ...report(true, reasonFor(ans, this.#timeoutMs), ans), updatedInput: ans.updated_input };
      }
      return report(ans.decision === 'allow', reasonFor(ans, this.#timeoutMs), ans);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      return report(false, `fluidbox denied this call: ${clean(msg, 500)}`, undefined, msg);
    }
  }

  /** Whether toolName is a brokered tool served by this adapter's own server. */
  #ours(input: PreToolUseHookInput): boolean {
    const m = /^mcp__([A-Za-z0-9_-]+?)__(.+)$/.exec(input.tool_name);
    if (!m || !this.#connections.get(m[1]!)?.includes(m[2]!)) return false;
    // Provenance, not the name: only an in-process server this host
    // registered has source "sdk". Absent (older CLIs) is not ours.
    return input.mcp_server?.source === 'sdk' && input.mcp_server.name === m[1];
  }

  readonly hook: HookCallback = async (input, toolUseID, { signal }): Promise<SyncHookJSONOutput> => {
    if (input.hook_event_name !== 'PreToolUse') {
      return preToolUse('deny', `fluidbox denied this call: the hook was called for ${clean(String(input.hook_event_name), 40)}, not PreToolUse`);
    }
    const pre = input as PreToolUseHookInput;
    const id = pre.tool_use_id || toolUseID || '';
    if (this.#ours(pre)) {
      // The handler of this tool is tools/call, which decides and executes
      // in one step; asking /permission too would decide the call twice.
      return preToolUse('allow', 'fluidbox decides this brokered call when it runs (tools/call)');
    }
    // The call's cwd as Claude Code reports it (a Bash cd can move it),
    // else the session's.
    const d = await this.#ask('hook', pre.tool_name, id, pre.tool_input, cleanCwd(pre.cwd) || this.#cwd, signal, pre);
    return preToolUse(d.allow ? 'allow' : 'deny', d.reason, d.updatedInput);
  };

  readonly canUseTool: CanUseTool = async (toolName, input, { signal, toolUseID }): Promise<PermissionResult> => {
    const d = await this.#ask('canUseTool', toolName, toolUseID, input, this.#cwd, signal);
    return d.allow ? { behavior: 'allow', updatedInput: d.updatedInput ?? input, toolUseID } : { behavior: 'deny', message: d.reason, toolUseID };
  };

  /** An in-process MCP server for one connection's brokered tools. */
  server(connection: string, tools: string[], timeoutMs: number): McpServerConfig {
    return createSdkMcpServer({
      name: connection,
      version: '1.0.0',
      alwaysLoad: true,
      // Claude Code's wall-clock limit per call: past fluidbox's deadline.
      timeout: timeoutMs + 60_000,
      tools: tools.map((t) => {
        // The run view names brokered tools but does not carry their
        // schemas, so the model is offered an open object; fluidbox checks
        // the input against the frozen schema at its schema stage.
        const shape = z.looseObject({}) as unknown as Record<string, never>;
        return tool(t, `${t} of the ${connection} connection, brokered by fluidbox (the gate decides each call; credentials stay in fluidbox).`, shape, async (args, extra) =>
          this.#brokeredCall(`mcp__${connection}__${t}`, args, extra),
        );
      }),
    });
  }

  async #brokeredCall(toolName: string, args: unknown, extra: unknown) {
    const start = performance.now();
    const meta = (extra as { _meta?: Record<string, unknown> } | undefined)?._meta;
    const id = meta?.['claudecode/toolUseId'];
    const signal = (extra as { signal?: AbortSignal } | undefined)?.signal;
    const fail = (reason: string, answer?: Answer, error?: string) => {
      try {
        this.#onDecision?.({ via: 'tools/call', toolName, toolUseId: typeof id === 'string' ? id : '', decision: 'deny', reason, answer, error, ms: performance.now() - start });
      } catch {
        // metrics only
      }
      return { content: [{ type: 'text' as const, text: reason }], isError: true };
    };
    if (typeof id !== 'string' || id === '') {
      return fail('fluidbox denied this call: Claude Code gave no tool_use_id to decide it by');
    }
    const input = args === undefined || args === null ? {} : args;
    if (!isPlainObject(input)) return fail('fluidbox denied this call: its input is not a JSON object');
    let ans: CallAnswer;
    try {
      ans = await this.#gate.callTool({ tool_call_id: id, tool_name: toolName, input }, Date.now() + this.#timeoutMs, signal);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      return fail(`fluidbox denied this call: ${clean(msg, 500)}`, undefined, msg);
    }
    if (ans.decision !== 'allow') return fail(reasonFor(ans, this.#timeoutMs), ans);
    const r = ans.result;
    if (typeof r !== 'object' || r === null || !Array.isArray(r.content)) {
      return fail('fluidbox denied this call: the brokered answer carried no result', ans);
    }
    try {
      this.#onDecision?.({ via: 'tools/call', toolName, toolUseId: id, decision: 'allow', reason: reasonFor(ans, this.#timeoutMs), answer: ans, ms: performance.now() - start });
    } catch {
      // metrics only
    }
    return {
      content: r.content as { type: 'text'; text: string }[],
      isError: r.isError === true,
      ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent as Record<string, unknown> } : {}),
    };
  }
}

/**
 * The hook's answer; updatedInput (an allow's narrowed input) is what
 * Claude Code then runs instead of its own input.
 */
function preToolUse(decision: 'allow' | 'deny', reason: string, updatedInput?: Record<string, unknown>): SyncHookJSONOutput {
  const out: SyncHookJSONOutput = { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: decision, permissionDecisionReason: reason } };
  if (decision === 'allow' && updatedInput !== undefined && out.hookSpecificOutput?.hookEventName === 'PreToolUse') {
    out.hookSpecificOutput.updatedInput = updatedInput;
  }
  return out;
}

/** The reason the model reads, as `fluidbox hook claude-code` words it. */
export function reasonFor(ans: Answer, timeoutMs: number): string {
  const parts: string[] = [];
  if (ans.source) parts.push(ans.source);
  if (ans.rule_id) parts.push(`rule ${ans.rule_id}`);
  const prov = parts.length > 0 ? ` (${clean(parts.join(', '), 200)})` : '';
  switch (ans.decision) {
    case 'allow': {
      const human = ans.approval_id ? `: a human approved it (${clean(ans.approval_id, 80)})` : '';
      const narrowed = ans.updated_input ? `; fluidbox narrowed the call's input: ${clean(ans.reason ?? '', 500)}` : '';
      return `fluidbox allowed${prov}${human}${narrowed}`;
    }
    case 'deny':
      return `fluidbox denied${prov}${ans.reason ? `: ${clean(ans.reason, 500)}` : ''}`;
    default:
      return `fluidbox denied this call: no human decided on approval ${clean(ans.approval_id ?? '', 80)} within ${Math.round(timeoutMs / 1000)} s; ask again later or ask the operator to approve it`;
  }
}

export type { Options };
export type { Run as FluidboxRun };
