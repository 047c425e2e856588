// The suite's Agent SDK program: one query() as an app would run it, with
// @fluidbox/claude-agent-sdk (mode "fluidbox") or without fluidbox at all
// (mode "plain": Claude Code's own allow rules and the model directly, the baseline the adapter's cost is measured against).
//
// Usage: node driver.mjs scenario.json. FLUIDBOX_AGENT_SDK_DIR names
// clients/agent-sdk (built, with its node_modules). Prints one JSON object
// on stdout: the tools of the session's init message, the result message,
// every decision the adapter reported, and for each tool_use id the time
// from the assistant message that carried it to its tool_result.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.env.FLUIDBOX_AGENT_SDK_DIR;
const sc = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const sdk = await import(pathToFileURL(join(dir, 'node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs')).href);
const adapter = await import(pathToFileURL(join(dir, 'dist/index.js')).href);

const out = { init_tools: null, result: null, decisions: [], tool_ms: {}, error: null, stderr: '' };
// The scenario's env adds to the base one (the SDK's env option replaces
// the whole environment; the adapter completes it).
const { env: extraEnv, ...extraOptions } = sc.options ?? {};
const env = { PATH: sc.path, HOME: sc.home, TMPDIR: sc.tmpdir, ...(sc.mode === 'plain' ? sc.plainEnv : {}), ...extraEnv };
let options = { cwd: sc.cwd, env, stderr: (d) => { out.stderr += d; }, persistSession: false, ...extraOptions };

try {
  if (sc.mode === 'fluidbox') {
    options = await adapter.withFluidbox(options, {
      ...sc.fluidbox,
      onDecision: (e) => out.decisions.push({ via: e.via, tool: e.toolName, id: e.toolUseId, decision: e.decision, reason: e.reason, ms: e.ms, error: e.error ?? null }),
    });
    // An app that wires the adapter's canUseTool alone, without its hook,
    // in Claude Code's default mode: what Claude Code's own rules allow
    // (reads) then runs without asking anyone.
    if (sc.canUseToolOnly) {
      const { hooks: _hooks, ...rest } = options;
      options = { ...rest, permissionMode: 'default' };
    }
  } else {
    // Claude Code's own permission rules allow the tools (bypassPermissions
    // is refused to root, and this is the same allow without a prompt).
    options = { permissionMode: 'dontAsk', allowedTools: ['Bash', 'Read', 'Write', 'Edit'], ...options, settingSources: [] };
    // An app that answers permission prompts itself (as the user
    // did): Claude Code then offers the tools that need a host, such as
    // AskUserQuestion.
    if (sc.hostAnswers) options.canUseTool = async (name) => ({ behavior: 'deny', message: `the driver does not run ${name}` });
  }
  const seen = new Map();
  for await (const m of sdk.query({ prompt: sc.prompt, options })) {
    const now = performance.now();
    if (m.type === 'system' && m.subtype === 'init') out.init_tools = m.tools;
    for (const b of Array.isArray(m.message?.content) ? m.message.content : []) {
      if (m.type === 'assistant' && b.type === 'tool_use') seen.set(b.id, now);
      if (m.type === 'user' && b.type === 'tool_result' && seen.has(b.tool_use_id)) out.tool_ms[b.tool_use_id] = now - seen.get(b.tool_use_id);
    }
    if (m.type === 'result') {
      out.result = { subtype: m.subtype, is_error: m.is_error, num_turns: m.num_turns, result: m.result ?? null, permission_denials: m.permission_denials ?? [] };
    }
  }
} catch (err) {
  out.error = `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
}
process.stdout.write(JSON.stringify(out) + '\n');
