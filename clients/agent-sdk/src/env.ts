// The environment of the Claude Code process. The SDK's env option replaces
// the process environment entirely, so the adapter builds a complete one:
// the caller's (or this process's) variables, minus every variable that
// would send model traffic or credentials somewhere other than the run's
// model proxy, plus fluidbox's and Anthropic's variables for the run.

import { homedir } from 'node:os';

/** A caller's env sets a variable the adapter owns. */
export class EnvConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FluidboxOptionsError';
  }
}

/** What the run contributes to the environment. */
export interface RunVars {
  fluidboxUrl: string;
  sessionId: string;
  token: string;
  modelUrl: string;
  maxOutputTokens: number;
}

// Dropped from the inherited environment: another provider, key, token or
// base URL would take model traffic past the proxy (or put a real key in
// the sandbox), and a config or settings override would change what Claude
// Code loads.
const dropped = [
  /^ANTHROPIC_/,
  /^CLAUDE_CODE_USE_/, // Bedrock, Vertex, Foundry
  /^CLAUDE_CODE_OAUTH_TOKEN/,
  /^CLAUDE_CODE_SKIP_.*_AUTH$/,
  /^AWS_BEARER_TOKEN_BEDROCK$/,
  /^CLAUDE_CONFIG_DIR$/,
  /^FLUIDBOX_/,
];

/** Variables Claude Code needs whatever the caller passed. */
const fixed: Record<string, string> = {
  // Every tool in the first request, as the claude-code bundle was checked.
  ENABLE_TOOL_SEARCH: 'false',
  // No traffic but the model proxy's: no telemetry, updates or reports.
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  DISABLE_TELEMETRY: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_ERROR_REPORTING: '1',
};

/**
 * Builds the environment: base (the caller's env option, else
 * process.env) without the dropped variables, then the fixed ones and the
 * run's. A caller's env may not set a variable the adapter owns to another
 * value: that is an error, not a silent override.
 */
export function runEnvironment(callerEnv: Record<string, string | undefined> | undefined, run: RunVars): Record<string, string> {
  const base = callerEnv ?? process.env;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) {
    if (v === undefined || dropped.some((re) => re.test(k))) continue;
    out[k] = v;
  }
  const owned: Record<string, string> = {
    ...fixed,
    FLUIDBOX_URL: run.fluidboxUrl,
    FLUIDBOX_SESSION_ID: run.sessionId,
    FLUIDBOX_SESSION_TOKEN: run.token,
    ANTHROPIC_BASE_URL: run.modelUrl,
    ANTHROPIC_API_KEY: run.token,
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(run.maxOutputTokens),
  };
  if (callerEnv) {
    for (const [k, v] of Object.entries(owned)) {
      const given = callerEnv[k];
      if (given !== undefined && given !== v && !(k in fixed)) {
        throw new EnvConflictError(`env.${k} is set by withFluidbox for the run; remove it from options.env`);
      }
    }
  }
  Object.assign(out, owned);
  // Claude Code finds its commands on PATH and keeps its state under HOME.
  if (!out.PATH) out.PATH = '/usr/local/bin:/usr/bin:/bin';
  if (!out.HOME) out.HOME = homedir();
  return out;
}
