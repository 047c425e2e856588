// Unit tests of the adapter against a scripted fluidbox API on 127.0.0.1
// (node:http): what withFluidbox returns, how its hook, canUseTool and
// brokered handlers answer for every kind of answer and failure. The real
// control plane and the real Claude Code are in the e2e suite
// (shared/internal/e2e/agentsdk).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HookCallback, HookCallbackMatcher, Options, PreToolUseHookInput, SyncHookJSONOutput } from '@anthropic-ai/claude-agent-sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';

import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { withFluidbox, FluidboxOptionsError, Gate, GateError, outputTokens, outputRate, brokered } from '../index.js';
import { candidates, globReport, maxOperandLinks, pathKinds, resolveOperands, resolvePaths } from '../paths.js';

const token = 'fbx_sess_unit_0123456789';
const sessionId = 'ses_unit';

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  auth: string | undefined;
  traceparent: string | undefined;
  body: any;
}

type Reply = { status: number; body: unknown } | ((req: Seen) => { status: number; body: unknown });

/** A scripted fluidbox: GET the run, and a queue of replies per path. */
async function fakeFluidbox(t: { after: (fn: () => void) => void }, run: Record<string, unknown>, script: Record<string, Reply[]> = {}) {
  const seen: Seen[] = [];
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    const s: Seen = { method: req.method ?? '', path: u.pathname, query: u.searchParams, auth: req.headers.authorization, traceparent: req.headers.traceparent as string | undefined, body: chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined };
    seen.push(s);
    let reply: Reply | undefined;
    if (req.method === 'GET' && u.pathname === `/v1/sessions/${sessionId}`) reply = { status: 200, body: run };
    else reply = script[u.pathname]?.shift();
    const r = typeof reply === 'function' ? reply(s) : reply ?? { status: 404, body: { error: { code: 'not_found', message: 'unscripted' } } };
    res.writeHead(r.status, { 'content-type': 'application/json' });
    res.end(typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen };
}

const claudeCodeRun = {
  id: sessionId,
  status: 'running',
  autonomous: false,
  trust_tier: 'trusted',
  tools: ['Bash', 'Edit', 'Glob', 'Grep', 'Read', 'WebFetch', 'Write', 'mcp__jira__echo', 'mcp__jira__create_issue'],
  budget: { limit_usd: 100, available_usd: 100, reserved_usd: 0, spent_usd: 0 },
};

const permPath = `/v1/sessions/${sessionId}/permission`;
const callPath = `/v1/sessions/${sessionId}/tools/call`;

function hookOf(opts: Options): { matcher: HookCallbackMatcher; hook: HookCallback } {
  const m = opts.hooks?.PreToolUse;
  assert.equal(m?.length, 1, 'one PreToolUse matcher');
  assert.equal(m[0]!.hooks.length, 1);
  return { matcher: m[0]!, hook: m[0]!.hooks[0]! };
}

function pre(tool: string, input: unknown, id = 'toolu_1', extra: Partial<PreToolUseHookInput> = {}): PreToolUseHookInput {
  return { hook_event_name: 'PreToolUse', session_id: 'cc', transcript_path: '/tmp/t', cwd: '/tmp', tool_name: tool, tool_input: input, tool_use_id: id, ...extra };
}

async function decide(hook: HookCallback, input: PreToolUseHookInput) {
  const out = (await hook(input, input.tool_use_id, { signal: new AbortController().signal })) as SyncHookJSONOutput;
  const h = out.hookSpecificOutput as { hookEventName: string; permissionDecision: string; permissionDecisionReason: string };
  assert.equal(h.hookEventName, 'PreToolUse');
  return { decision: h.permissionDecision, reason: h.permissionDecisionReason };
}

test('withFluidbox: dontAsk, a blocking hook for every tool, the frozen tools, a complete environment', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun);
  const opts = await withFluidbox(
    { model: 'claude-sonnet-4-5', env: { PATH: '/opt/bin:/usr/bin', HOME: '/home/u', ANTHROPIC_AUTH_TOKEN: 'sk-ant-real', CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_BASE_URL: undefined } },
    { url: fb.url + '/', sessionId, token },
  );
  assert.equal(opts.permissionMode, 'dontAsk');
  const { matcher } = hookOf(opts);
  assert.equal(matcher.onFailure, 'block');
  assert.equal(matcher.matcher, undefined, 'matches every tool');
  assert.ok((matcher.timeout ?? 0) > 540, 'the SDK timeout is past the adapter deadline');
  assert.equal(typeof opts.canUseTool, 'function');
  assert.deepEqual([...(opts.tools as string[])].sort(), ['Bash', 'Edit', 'Glob', 'Grep', 'Read', 'WebFetch', 'Write']);
  for (const name of ['Agent', 'AskUserQuestion', 'EnterPlanMode', 'ExitPlanMode', 'NotebookEdit', 'WebSearch', 'CronCreate', 'Skill']) {
    assert.ok(opts.disallowedTools?.includes(name), `${name} is disallowed`);
  }
  assert.ok(!opts.disallowedTools?.includes('Bash'));
  assert.deepEqual(opts.settingSources, []);
  const env = opts.env!;
  assert.equal(env.PATH, '/opt/bin:/usr/bin');
  assert.equal(env.HOME, '/home/u');
  assert.equal(env.ANTHROPIC_BASE_URL, `${fb.url}/v1/sessions/${sessionId}/model`);
  assert.equal(env.ANTHROPIC_API_KEY, token);
  assert.equal(env.ANTHROPIC_AUTH_TOKEN, undefined, 'a real key from the caller never reaches Claude Code');
  assert.equal(env.CLAUDE_CODE_USE_BEDROCK, undefined, 'no other provider');
  assert.equal(env.FLUIDBOX_SESSION_ID, sessionId);
  assert.equal(env.ENABLE_TOOL_SEARCH, 'false');
  assert.equal(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
  assert.equal(env.CLAUDE_CODE_MAX_OUTPUT_TOKENS, '32000');
  assert.ok(opts.mcpServers?.jira, 'the jira connection is an in-process server');
  assert.equal((opts.mcpServers!.jira as { type: string }).type, 'sdk');
  assert.equal(fb.seen[0]!.auth, `Bearer ${token}`);
});

test('withFluidbox: without env it starts from process.env, and PATH and HOME are always there', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun);
  const opts = await withFluidbox({}, { url: fb.url, sessionId, token });
  assert.equal(opts.env!.PATH, process.env.PATH);
  const bare = await withFluidbox({ env: {} }, { url: fb.url, sessionId, token });
  assert.ok(bare.env!.PATH, 'PATH set when the caller gave none');
  assert.ok(bare.env!.HOME, 'HOME set when the caller gave none');
});

test('withFluidbox refuses options that bypass the gate', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun);
  const cfg = { url: fb.url, sessionId, token };
  const bad: [string, Options][] = [
    ['bypassPermissions', { permissionMode: 'bypassPermissions' }],
    ['acceptEdits', { permissionMode: 'acceptEdits' }],
    ['auto', { permissionMode: 'auto' }],
    ['default', { permissionMode: 'default' }],
    ['allowDangerouslySkipPermissions', { allowDangerouslySkipPermissions: true }],
    ['canUseTool', { canUseTool: async () => ({ behavior: 'allow' }) }],
    ['allowedTools', { allowedTools: ['Bash'] }],
    ['permissionPromptToolName', { permissionPromptToolName: 'mcp__x__y' }],
    ['toolAliases', { toolAliases: { Bash: 'Read' } }],
    ['extraArgs', { extraArgs: { 'dangerously-skip-permissions': null } }],
    ['executableArgs', { executableArgs: ['--require', '/tmp/x.js'] }],
    ['plugins', { plugins: [{ type: 'local', path: '/tmp/p' }] }],
    ['PreToolUse hooks', { hooks: { PreToolUse: [{ hooks: [async () => ({})] }] } }],
    ['PermissionRequest hooks', { hooks: { PermissionRequest: [{ hooks: [async () => ({})] }] } }],
    ['settings file', { settings: '/tmp/settings.json' }],
    ['settings.permissions', { settings: { permissions: { defaultMode: 'bypassPermissions' } } as Options['settings'] }],
    ['settings.disableAllHooks', { settings: { disableAllHooks: true } as Options['settings'] }],
    ['env ANTHROPIC_BASE_URL', { env: { ANTHROPIC_BASE_URL: 'https://api.anthropic.com' } }],
    ['mcpServers shadowing a connection', { mcpServers: { jira: { command: 'jira-mcp' } } }],
  ];
  for (const [name, o] of bad) {
    await assert.rejects(withFluidbox(o, cfg), (err: Error) => err.name === 'FluidboxOptionsError', name);
  }
  // What is harmless is kept.
  const ok = await withFluidbox({ permissionMode: 'dontAsk', allowedTools: [], hooks: { PostToolUse: [{ hooks: [async () => ({})] }] }, disallowedTools: ['Bash'], tools: ['Read', 'Bash', 'Agent'] }, cfg);
  assert.ok(ok.hooks?.PostToolUse);
  assert.ok(ok.disallowedTools?.includes('Bash'));
  assert.deepEqual(ok.tools, ['Bash', 'Read'], 'the caller may narrow the tools, never widen them past the run');
  assert.ok(new FluidboxOptionsError('x') instanceof Error);
});

test('withFluidbox: a bad URL, a run that cannot be read, an ended run, a budget too small', async (t) => {
  await assert.rejects(withFluidbox({}, { url: 'ftp://x', sessionId, token }), /http/);
  await assert.rejects(withFluidbox({}, { url: 'http://u:p@127.0.0.1', sessionId, token }), /credentials/);
  await assert.rejects(withFluidbox({}, { url: 'http://127.0.0.1:1', sessionId: 'nope', token }), /ses_/);
  const ended = await fakeFluidbox(t, { ...claudeCodeRun, status: 'ended' });
  await assert.rejects(withFluidbox({}, { url: ended.url, sessionId, token }), /ended/);
  const poor = await fakeFluidbox(t, { ...claudeCodeRun, budget: { ...claudeCodeRun.budget, available_usd: 0.0001 } });
  await assert.rejects(withFluidbox({}, { url: poor.url, sessionId, token }), /budget/);
  const small = await fakeFluidbox(t, { ...claudeCodeRun, budget: { ...claudeCodeRun.budget, available_usd: 0.1 } });
  const opts = await withFluidbox({ model: 'claude-opus-4-5' }, { url: small.url, sessionId, token });
  assert.equal(opts.env!.CLAUDE_CODE_MAX_OUTPUT_TOKENS, String(outputTokens(0.1, 'claude-opus-4-5')));
  assert.equal(outputTokens(0.1, 'claude-opus-4-5'), 2000, '$0.05 at $25/MTok');
});

test('outputTokens: sized to half the budget at the output price, the dearest when the model is unknown', () => {
  assert.equal(outputRate('claude-opus-4-5'), 25);
  assert.ok(outputRate() >= outputRate('claude-opus-4-5'));
  assert.equal(outputRate('no-such-model'), outputRate());
  assert.equal(outputTokens(1000), 32000);
  assert.equal(outputTokens(0), 0);
  assert.equal(outputTokens(-1), 0);
  assert.equal(outputTokens(Number.NaN), 0);
});

test('the hook: allow, deny with fluidbox\'s reason, the same tool_call_id and input as asked', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: [
      { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'reads' } },
      { status: 200, body: { decision: 'deny', source: 'policy', rule_id: 'no-push', reason: 'denied by rule "no-push"' } },
    ],
  });
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token }));
  const a = await decide(hook, pre('Read', { file_path: '/repo/a' }, 'toolu_a'));
  assert.deepEqual(a, { decision: 'allow', reason: 'fluidbox allowed (policy, rule reads)' });
  const d = await decide(hook, pre('Bash', { command: 'git push' }, 'toolu_b'));
  assert.deepEqual(d, { decision: 'deny', reason: 'fluidbox denied (policy, rule no-push): denied by rule "no-push"' });
  const asks = fb.seen.filter((s) => s.path === permPath);
  // With the call's cwd and its path resolved (/repo does not exist: the
  // path resolves through /).
  assert.deepEqual(asks[0]!.body, { tool_call_id: 'toolu_a', tool_name: 'Read', input: { file_path: '/repo/a' }, cwd: '/tmp', resolved_paths: { file_path: '/repo/a' }, path_kinds: { file_path: 'absent' } });
  assert.deepEqual(asks[1]!.body, { tool_call_id: 'toolu_b', tool_name: 'Bash', input: { command: 'git push' }, cwd: '/tmp' }, 'no path field, no resolved_paths');
  assert.equal(asks[1]!.body.tool_call_id, 'toolu_b');
  assert.equal(asks[0]!.auth, `Bearer ${token}`);
});

test('the hook sends the caller\'s traceparent, and never one that is malformed', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: [
      { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'reads' } },
      { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'reads' } },
    ],
  });
  const tps = ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx-evil: 1'];
  let current: string | undefined;
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token, traceparent: () => current }));
  current = tps[0];
  await decide(hook, pre('Read', { file_path: '/repo/a' }, 'toolu_a'));
  current = tps[1];
  await decide(hook, pre('Read', { file_path: '/repo/b' }, 'toolu_b'));
  const asks = fb.seen.filter((s) => s.path === permPath);
  assert.equal(asks[0]!.traceparent, tps[0]);
  assert.equal(asks[1]!.traceparent, undefined);
});

test('the hook waits through pending with long polls of the same tool_call_id', async (t) => {
  const pending = { status: 200, body: { decision: 'pending', approval_id: 'apr_1', rule_id: 'ask' } };
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: [pending, pending, { status: 200, body: { decision: 'allow', approval_id: 'apr_1', source: 'approval' } }],
  });
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token, decisionTimeoutMs: 60_000 }));
  const a = await decide(hook, pre('Bash', { command: 'make deploy' }, 'toolu_w'));
  assert.deepEqual(a, { decision: 'allow', reason: 'fluidbox allowed (approval): a human approved it (apr_1)' });
  const asks = fb.seen.filter((s) => s.path === permPath);
  assert.equal(asks.length, 3);
  for (const s of asks) {
    assert.equal(s.body.tool_call_id, 'toolu_w');
    assert.ok(Number(s.query.get('wait_seconds')) >= 1 && Number(s.query.get('wait_seconds')) <= 25, `wait_seconds ${s.query.get('wait_seconds')}`);
  }
});

test('the hook denies a pending answer at the deadline', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: Array.from({ length: 20 }, () => ({ status: 200, body: { decision: 'pending', approval_id: 'apr_2' } })),
  });
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token, decisionTimeoutMs: 1500 }));
  const d = await decide(hook, pre('Bash', { command: 'make deploy' }));
  assert.equal(d.decision, 'deny');
  assert.match(d.reason, /no human decided on approval apr_2 within 2 s/);
});

test('the hook retries 503 and 429, and denies every other failure', async (t) => {
  const unavailable = { status: 503, body: { error: { code: 'unavailable', message: 'store down' } } };
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: [
      unavailable,
      { status: 429, body: { error: { code: 'rate_limited', message: 'slow down' } } },
      { status: 200, body: { decision: 'allow' } },
      { status: 500, body: { error: { code: 'internal', message: 'boom' } } },
      { status: 401, body: { error: { code: 'unauthenticated', message: 'bad token' } } },
      { status: 409, body: { error: { code: 'conflict', message: 'different input' } } },
      { status: 200, body: { decision: 'maybe' } },
      { status: 200, body: 'not json' },
      { status: 200, body: { decision: 'allow', reason: 7 } },
      { status: 200, body: '<html>a proxy</html>' },
      ...Array.from({ length: 40 }, () => unavailable),
    ],
  });
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token, decisionTimeoutMs: 2000 }));
  assert.equal((await decide(hook, pre('Read', {}, 'r1'))).decision, 'allow', '503 then 429 then allow');
  for (const [id, want] of [
    ['r2', /500 internal: boom/],
    ['r3', /401 unauthenticated/],
    ['r4', /409 conflict/],
    ['r5', /unknown decision "maybe"/],
    ['r6', /not JSON/],
    ['r7', /non-string reason/],
    ['r8', /not JSON/],
    ['r9', /no answer from fluidbox before the deadline .*503/],
  ] as const) {
    const d = await decide(hook, pre('Read', {}, id));
    assert.equal(d.decision, 'deny', id);
    assert.match(d.reason, want, id);
    assert.ok(!d.reason.includes(token), 'no token in a reason');
  }
});

test('the hook denies an unscripted answer and input it cannot ask about', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun);
  const { hook } = hookOf(await withFluidbox({}, { url: fb.url, sessionId, token, decisionTimeoutMs: 1000 }));
  const d1 = await decide(hook, pre('Bash', { command: 'ls' }, 'x0'));
  assert.match(d1.reason, /404 not_found/);
  const d2 = await decide(hook, pre('Bash', 'ls -la', 'x1'));
  assert.match(d2.reason, /not a JSON object/);
  const d3 = await decide(hook, pre('Bash', { command: 'ls' }, ''));
  assert.match(d3.reason, /no tool name or tool_use_id/);
  const d4 = await decide(hook, { ...pre('Bash', {}), hook_event_name: 'PostToolUse' } as unknown as PreToolUseHookInput);
  assert.match(d4.reason, /PostToolUse, not PreToolUse/);
});

test('the hook denies when nothing listens', async () => {
  const { createServer: cs } = await import('node:net');
  // A port that was free a moment ago: bind, note, close.
  const port = await new Promise<number>((resolve) => {
    const s = cs().listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const run = { ...claudeCodeRun };
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(run));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const opts = await withFluidbox({}, { url: `http://127.0.0.1:${port}`, sessionId, token, decisionTimeoutMs: 1200 });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  const d = await decide(hookOf(opts).hook, pre('Bash', { command: 'cat README.txt' }, 'toolu_down'));
  assert.equal(d.decision, 'deny');
  assert.match(d.reason, /cannot reach fluidbox|deadline/);
});

test('canUseTool asks the same gate and maps the answer', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [permPath]: [{ status: 200, body: { decision: 'allow' } }, { status: 200, body: { decision: 'deny', source: 'capability', reason: 'not in the run' } }],
  });
  const opts = await withFluidbox({}, { url: fb.url, sessionId, token });
  const base = { signal: new AbortController().signal, requestId: 'r' };
  const a = await opts.canUseTool!('Read', { file_path: '/a' }, { ...base, toolUseID: 'toolu_c1' });
  assert.deepEqual(a, { behavior: 'allow', updatedInput: { file_path: '/a' }, toolUseID: 'toolu_c1' });
  const d = await opts.canUseTool!('Agent', { prompt: 'x' }, { ...base, toolUseID: 'toolu_c2' });
  assert.deepEqual(d, { behavior: 'deny', message: 'fluidbox denied (capability): not in the run', toolUseID: 'toolu_c2' });
  assert.deepEqual(fb.seen.filter((s) => s.path === permPath).map((s) => s.body.tool_call_id), ['toolu_c1', 'toolu_c2']);
});

test('brokered tools: the hook lets only the adapter\'s own server through, whose handler calls tools/call once', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, {
    [callPath]: [
      { status: 200, body: { decision: 'pending', approval_id: 'apr_9' } },
      { status: 200, body: { decision: 'allow', source: 'approval', approval_id: 'apr_9', result: { content: [{ type: 'text', text: 'hello' }], isError: false }, latency_ms: 3 } },
      { status: 200, body: { decision: 'deny', source: 'policy', rule_id: 'no-issues', reason: 'denied by rule "no-issues"' } },
    ],
    [permPath]: [{ status: 200, body: { decision: 'deny', source: 'capability' } }],
  });
  const events: string[] = [];
  const opts = await withFluidbox({}, { url: fb.url, sessionId, token, onDecision: (e) => events.push(`${e.via}:${e.toolName}:${e.decision}`) });
  const { hook } = hookOf(opts);
  const ours = await decide(hook, pre('mcp__jira__echo', { text: 'hi' }, 'toolu_m1', { mcp_server: { name: 'jira', source: 'sdk' } }));
  assert.equal(ours.decision, 'allow');
  assert.equal(fb.seen.filter((s) => s.path === permPath).length, 0, 'no /permission for a brokered call: tools/call decides it');
  // The same name from a configured (not in-process) server is asked like any call.
  const other = await decide(hook, pre('mcp__jira__echo', { text: 'hi' }, 'toolu_m2', { mcp_server: { name: 'jira', source: 'project' } }));
  assert.equal(other.decision, 'deny');
  assert.equal(fb.seen.filter((s) => s.path === permPath).length, 1);

  const server = opts.mcpServers!.jira as unknown as { instance: { connect: (t: unknown) => Promise<void> } };
  const [clientT, serverT] = InMemoryTransport.createLinkedPair();
  await server.instance.connect(serverT);
  const client = new Client({ name: 'unit', version: '1' });
  await client.connect(clientT);
  const list = await client.listTools();
  assert.deepEqual(list.tools.map((x) => x.name).sort(), ['create_issue', 'echo']);
  const ok = await client.callTool({ name: 'echo', arguments: { text: 'hi', extra: [1] }, _meta: { 'claudecode/toolUseId': 'toolu_m1' } });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'hello' }]);
  assert.notEqual(ok.isError, true);
  const calls = fb.seen.filter((s) => s.path === callPath);
  assert.equal(calls.length, 2, 'pending, then the long poll that returned the result');
  for (const c of calls) assert.deepEqual(c.body, { tool_call_id: 'toolu_m1', tool_name: 'mcp__jira__echo', input: { text: 'hi', extra: [1] } });
  const no = await client.callTool({ name: 'create_issue', arguments: { title: 'x' }, _meta: { 'claudecode/toolUseId': 'toolu_m3' } });
  assert.equal(no.isError, true);
  assert.deepEqual(no.content, [{ type: 'text', text: 'fluidbox denied (policy, rule no-issues): denied by rule "no-issues"' }]);
  const noId = await client.callTool({ name: 'echo', arguments: {} });
  assert.equal(noId.isError, true);
  assert.equal(fb.seen.filter((s) => s.path === callPath).length, 3, 'a call without a tool_use_id never reaches tools/call');
  assert.deepEqual(events, ['hook:mcp__jira__echo:deny', 'tools/call:mcp__jira__echo:allow', 'tools/call:mcp__jira__create_issue:deny', 'tools/call:mcp__jira__echo:deny']);
  await client.close();
});

test('brokered: names split at the connection', () => {
  assert.deepEqual([...brokered(['Bash', 'mcp__jira__echo', 'mcp__jira__a__b', 'mcp__gh-x__list'])], [
    ['jira', ['echo', 'a__b']],
    ['gh-x', ['list']],
  ]);
});

/**
 * A directory as a fork's pull request could leave it: root/.env holds a
 * secret, work/notes.txt -> ../.env, link -> real, a symlink loop and a
 * dangling symlink. root is resolved itself (tmpdir may be a symlink).
 */
async function plantedTree(t: { after: (fn: () => Promise<void>) => void }) {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'fluidbox-paths-')));
  t.after(() => rm(root, { recursive: true, force: true }));
  const work = join(root, 'work');
  await mkdir(join(root, 'real'), { recursive: true });
  await mkdir(work);
  await writeFile(join(root, '.env'), 'SECRET=1\n');
  await writeFile(join(work, 'README.md'), 'hi\n');
  await symlink('../.env', join(work, 'notes.txt'));
  await symlink(join(root, 'real'), join(root, 'link'));
  await symlink('loop', join(work, 'loop'));
  await symlink('../missing.txt', join(work, 'dangling'));
  return { root, work };
}

test('resolvePaths: as the hook resolves them (symlinks followed, relative against cwd, through the deepest existing ancestor)', async (t) => {
  const { root, work } = await plantedTree(t);
  const cases: [string, Record<string, unknown>, string, Record<string, string> | undefined][] = [
    ['a symlink, relative', { file_path: 'notes.txt' }, work, { file_path: join(root, '.env') }],
    ['a symlink, absolute', { file_path: join(work, 'notes.txt') }, '', { file_path: join(root, '.env') }],
    ['a symlink reached by ..', { file_path: join(work, '..', 'work', 'notes.txt') }, '', { file_path: join(root, '.env') }],
    ['a new file under a linked directory', { file_path: 'link/new/file.go' }, root, { file_path: join(root, 'real', 'new', 'file.go') }],
    ['every path field; patterns as given', { path: join(root, 'link'), pattern: '**/*.go', notebook_path: 'work/notes.txt', glob: '*.env' }, root, { path: join(root, 'real'), notebook_path: join(root, '.env') }],
    ['a plain file', { file_path: join(work, 'README.md') }, '', { file_path: join(work, 'README.md') }],
    ['a dangling symlink: to where it points, which a Write creates', { file_path: 'dangling' }, work, { file_path: join(root, 'missing.txt') }],
    ['a loop is left out', { file_path: 'loop' }, work, undefined],
    ['through a file is left out', { file_path: 'README.md/x' }, work, undefined],
    ['relative without cwd is left out', { file_path: 'notes.txt' }, '', undefined],
    ['not a string, or empty', { file_path: 7, path: '', notebook_path: null }, work, undefined],
    ['a NUL byte is left out', { file_path: 'notes.txt\u0000x' }, work, undefined],
  ];
  for (const [name, input, cwd, want] of cases) {
    assert.deepEqual(await resolvePaths(input, cwd), want, name);
  }
});

test('the hook and canUseTool send the call\'s cwd and its paths resolved: a symlink is judged by its target', async (t) => {
  const { root, work } = await plantedTree(t);
  const envPath = join(root, '.env');
  // The scripted gate judges as fluidbox's does: deny if the given or the
  // resolved path is a .env.
  const judge = (s: Seen) => {
    const paths = [s.body.input.file_path, ...Object.values(s.body.resolved_paths ?? {})];
    return paths.some((p) => typeof p === 'string' && p.endsWith('/.env'))
      ? { status: 200, body: { decision: 'deny', source: 'policy', rule_id: 'no-env', reason: 'denied by rule "no-env"' } }
      : { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'work' } };
  };
  const fb = await fakeFluidbox(t, claudeCodeRun, { [permPath]: Array.from({ length: 8 }, () => judge) });
  const opts = await withFluidbox({ cwd: join(work, 'sub', '..') }, { url: fb.url, sessionId, token });
  const { hook } = hookOf(opts);

  const readme = await decide(hook, pre('Read', { file_path: join(work, 'README.md') }, 'p1', { cwd: work }));
  assert.equal(readme.decision, 'allow');
  const notes = await decide(hook, pre('Read', { file_path: join(work, 'notes.txt') }, 'p2', { cwd: work }));
  assert.deepEqual(notes, { decision: 'deny', reason: 'fluidbox denied (policy, rule no-env): denied by rule "no-env"' });
  // A relative path against the hook input's cwd, cleaned.
  await decide(hook, pre('Grep', { pattern: 'SECRET', path: 'notes.txt' }, 'p3', { cwd: `${work}/./` }));
  // No usable cwd in the hook input: the session's (options.cwd).
  await decide(hook, pre('Read', { file_path: 'notes.txt' }, 'p4', { cwd: 'relative/dir' }));
  const base = { signal: new AbortController().signal, requestId: 'r' };
  const cu = await opts.canUseTool!('Read', { file_path: 'notes.txt' }, { ...base, toolUseID: 'p5' });
  assert.equal(cu?.behavior, 'deny');

  const asks = fb.seen.filter((s) => s.path === permPath).map((s) => s.body);
  assert.deepEqual(asks[0], { tool_call_id: 'p1', tool_name: 'Read', input: { file_path: join(work, 'README.md') }, cwd: work, resolved_paths: { file_path: join(work, 'README.md') }, path_kinds: { file_path: 'file' } });
  assert.deepEqual(asks[1], { tool_call_id: 'p2', tool_name: 'Read', input: { file_path: join(work, 'notes.txt') }, cwd: work, resolved_paths: { file_path: envPath }, path_kinds: { file_path: 'file' } });
  assert.deepEqual(asks[2], { tool_call_id: 'p3', tool_name: 'Grep', input: { pattern: 'SECRET', path: 'notes.txt' }, cwd: work, resolved_paths: { path: envPath }, path_kinds: { path: 'file' } });
  assert.deepEqual(asks[3], { tool_call_id: 'p4', tool_name: 'Read', input: { file_path: 'notes.txt' }, cwd: work, resolved_paths: { file_path: envPath }, path_kinds: { file_path: 'file' } });
  assert.deepEqual(asks[4], { tool_call_id: 'p5', tool_name: 'Read', input: { file_path: 'notes.txt' }, cwd: work, resolved_paths: { file_path: envPath }, path_kinds: { file_path: 'file' } });
});

test('without options.cwd, the session cwd is this process\'s', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun, { [permPath]: [{ status: 200, body: { decision: 'deny' } }] });
  const opts = await withFluidbox({}, { url: fb.url, sessionId, token });
  await opts.canUseTool!('Grep', { pattern: 'KEY' }, { signal: new AbortController().signal, requestId: 'r', toolUseID: 'c1' });
  assert.equal(fb.seen.find((s) => s.path === permPath)!.body.cwd, process.cwd());
});

test('a token that is not a session token is refused before anything is sent or exported', async (t) => {
  const fb = await fakeFluidbox(t, claudeCodeRun);
  const bad: [string, unknown][] = [
    ['an admin token', 'e2e-admin-token-0123456789'],
    ['a runner token', 'fbx_run_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['a trigger key', 'fbx_trg_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['the prefix alone', 'fbx_sess_'],
    ['a session token with a header after it', 'fbx_sess_abc\r\nx-admin: 1'],
    ['a session token behind a space', ' fbx_sess_abc'],
    ['empty', ''],
    ['not a string', 42],
  ];
  for (const [name, tok] of bad) {
    for (const attempt of [
      () => withFluidbox({ env: { PATH: '/usr/bin' } }, { url: fb.url, sessionId, token: tok as string }),
      async () => new Gate({ url: fb.url, sessionId, token: tok as string }),
    ]) {
      await assert.rejects(attempt(), (err: Error) => {
        assert.ok(err instanceof GateError, name);
        assert.match(err.message, /token is not a session token \(fbx_sess_\.\.\.\): only a run's session token belongs in the sandbox/, name);
        if (typeof tok === 'string' && tok.trim().length > 'fbx_sess_'.length) assert.ok(!err.message.includes(tok.trim()), `${name}: the token is not in the error`);
        return true;
      }, name);
    }
  }
  assert.equal(fb.seen.length, 0, 'nothing reached fluidbox');
  // A session token is taken.
  const ok = await withFluidbox({}, { url: fb.url, sessionId, token });
  assert.equal(ok.env!.ANTHROPIC_API_KEY, token);
});

test('pathKinds: file, dir or absent by lstat, a link as what it points to', async (t) => {
  const { root, work } = await plantedTree(t);
  assert.deepEqual(await pathKinds({ file_path: 'README.md', path: work, notebook_path: 'dangling' }, work), { file_path: 'file', path: 'dir', notebook_path: 'absent' });
  assert.deepEqual(await pathKinds({ path: 'link' }, root), { path: 'dir' });
  assert.deepEqual(await pathKinds({ file_path: 'notes.txt' }, work), { file_path: 'file' });
  assert.equal(await pathKinds({ file_path: 'loop' }, work), undefined);
  assert.equal(await pathKinds({ file_path: 'notes.txt' }, ''), undefined);
});

test('a narrowed allow: the hook answers updatedInput and canUseTool runs it; an updated input that is not an object is a deny', async (t) => {
  const narrowed = { pattern: 'KEY', path: '.', glob: '!**/.[eE][nN][vV]' };
  const answer = { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'grep', reason: 'allowed by rule "grep"; narrowed', updated_input: narrowed } };
  const bad = { status: 200, body: { decision: 'allow', rule_id: 'grep', updated_input: 'rm -rf /' } };
  const fb = await fakeFluidbox(t, claudeCodeRun, { [permPath]: [answer, answer, bad] });
  const opts = await withFluidbox({ cwd: tmpdir() }, { url: fb.url, sessionId, token });
  const { hook } = hookOf(opts);
  const out = await hook(pre('Grep', { pattern: 'KEY', path: '.' }, 'n1', { cwd: tmpdir() }), 'n1', { signal: new AbortController().signal });
  const h = (out as { hookSpecificOutput: Record<string, unknown> }).hookSpecificOutput;
  assert.equal(h.permissionDecision, 'allow');
  assert.deepEqual(h.updatedInput, narrowed);
  assert.match(String(h.permissionDecisionReason), /narrowed/);
  const base = { signal: new AbortController().signal, requestId: 'r' };
  const cu = await opts.canUseTool!('Grep', { pattern: 'KEY', path: '.' }, { ...base, toolUseID: 'n2' });
  assert.deepEqual(cu, { behavior: 'allow', updatedInput: narrowed, toolUseID: 'n2' });
  const refused = await decide(hook, pre('Grep', { pattern: 'KEY' }, 'n3', { cwd: tmpdir() }));
  assert.equal(refused.decision, 'deny');
});

test('the hook sends a subagent\'s agent_id and agent_type, and nothing for the main agent', async (t) => {
  const allow = { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'diff' } };
  const fb = await fakeFluidbox(t, claudeCodeRun, { [permPath]: [allow, allow] });
  const opts = await withFluidbox({ cwd: '/tmp' }, { url: fb.url, sessionId, token });
  const { hook } = hookOf(opts);
  await decide(hook, pre('Bash', { command: 'git diff' }, 's1', { agent_id: 'a349243d', agent_type: 'general-purpose' } as Partial<PreToolUseHookInput>));
  await decide(hook, pre('Bash', { command: 'git diff' }, 'm1'));
  const asks = fb.seen.filter((s) => s.path === permPath).map((s) => s.body);
  assert.equal(asks[0].agent_id, 'a349243d');
  assert.equal(asks[0].agent_type, 'general-purpose');
  assert.ok(!('agent_id' in asks[1]) && !('agent_type' in asks[1]), 'the main agent\'s ask carries no agent fields');
});

const operandKey = (word: string) => 'command@' + createHash('sha256').update(word).digest('hex');

test('candidates: the words of a line that may be paths, quotes removed, expansions and patterns left out', () => {
  assert.deepEqual(candidates(`cat notes.txt "a b" 'c'd --file=e.txt -n 5 HEAD:f.txt $X/g *.md ~/h \\i;wc<j>k|l # m`), [
    'cat', 'notes.txt', 'a b', 'cd', 'e.txt', '5', 'HEAD:f.txt', 'f.txt', 'i', 'wc', 'j', 'k', 'l',
  ]);
  assert.deepEqual(candidates('cat "$HOME/x" "`y`" z'), ['cat', 'z']);
});

test('resolveOperands: every word through a link, keyed by its text as the gate looks it up; more than 8 links are refused', async (t) => {
  const { root, work } = await plantedTree(t);
  assert.deepEqual(await resolveOperands('cat README.md notes.txt "notes.txt" --x=notes.txt', work), { [operandKey('notes.txt')]: join(root, '.env') });
  assert.deepEqual(await resolveOperands('git show HEAD:notes.txt', work), { [operandKey('notes.txt')]: join(root, '.env') });
  assert.equal(await resolveOperands('cat README.md', work), undefined);
  assert.equal(await resolveOperands('cat notes.txt', ''), undefined);
  assert.equal(await resolveOperands(7, work), undefined);
  for (let i = 0; i <= maxOperandLinks; i++) await symlink('../.env', join(work, `l${i}`));
  const many = Array.from({ length: maxOperandLinks + 1 }, (_, i) => `l${i}`).join(' ');
  await assert.rejects(resolveOperands(`cat ${many}`, work), /more than 8 paths through symbolic links/);
});

test('globReport: every name below the directory that is not a directory, in order, links never followed; bounded', async (t) => {
  const { root, work } = await plantedTree(t);
  await mkdir(join(work, 'src', '.hidden'), { recursive: true });
  await writeFile(join(work, 'src', 'b.go'), '');
  await writeFile(join(work, 'src', '.hidden', 'c'), '');
  await symlink(root, join(work, 'up'));
  const want = ['README.md', 'dangling', 'loop', 'notes.txt', 'src/.hidden/c', 'src/b.go', 'up'];
  assert.deepEqual(await globReport({ pattern: '**/*' }, work), { entries: want, complete: true });
  assert.deepEqual(await globReport({ pattern: '*', path: 'work' }, root), await globReport({ pattern: '*', path: work }, ''));
  assert.deepEqual(await globReport({ pattern: '*', path: 'README.md' }, work), { entries: ['.'], complete: true });
  assert.deepEqual(await globReport({ pattern: '*', path: 'absent' }, work), { entries: [], complete: true });
  assert.equal(await globReport({ pattern: '*', path: 7 }, work), undefined);
  assert.equal(await globReport({ pattern: '*' }, ''), undefined);
  // Past its time: what it has, incomplete.
  let clock = 0;
  const late = await globReport({ pattern: '*' }, work, () => (clock += 5000));
  assert.equal(late?.complete, false);
});

test('the hook sends a Glob\'s search report and a Bash line\'s words through links; too many links deny without asking', async (t) => {
  const { root, work } = await plantedTree(t);
  const ok = { status: 200, body: { decision: 'allow', source: 'policy', rule_id: 'r' } };
  const fb = await fakeFluidbox(t, claudeCodeRun, { [permPath]: [ok, ok] });
  const opts = await withFluidbox({ cwd: work }, { url: fb.url, sessionId, token });
  const { hook } = hookOf(opts);
  await decide(hook, pre('Glob', { pattern: '**/*' }, 'g1', { cwd: work }));
  await decide(hook, pre('Bash', { command: 'cat notes.txt' }, 'b1', { cwd: work }));
  for (let i = 0; i <= maxOperandLinks; i++) await symlink('../.env', join(work, `l${i}`));
  const many = Array.from({ length: maxOperandLinks + 1 }, (_, i) => `l${i}`).join(' ');
  const refused = await decide(hook, pre('Bash', { command: `cat ${many}` }, 'b2', { cwd: work }));
  assert.equal(refused.decision, 'deny');
  assert.match(refused.reason, /more than 8 paths through symbolic links/);
  const asks = fb.seen.filter((s) => s.path === permPath).map((s) => s.body);
  assert.equal(asks.length, 2, 'the refused line is never asked about');
  assert.deepEqual(asks[0].search_report, { entries: ['README.md', 'dangling', 'loop', 'notes.txt'], complete: true });
  assert.deepEqual(asks[1].resolved_paths, { [operandKey('notes.txt')]: join(root, '.env') });
  assert.equal(asks[1].search_report, undefined);
});
