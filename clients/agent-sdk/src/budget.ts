// Output-token sizing. fluidbox's model proxy books, before it forwards a
// request, max_tokens at the model's output price plus the request's size
// at its input price, and refuses (402) a request the run's available
// budget cannot cover. Claude Code declares a large max_tokens by default,
// so a run with a small budget would be refused on its first request; the
// adapter sizes CLAUDE_CODE_MAX_OUTPUT_TOKENS to the budget instead.

import { readFileSync } from 'node:fs';

/** Claude Code's own default output limit, the most the adapter sets. */
export const maxOutputTokensCap = 32_000;
/** The share of the available budget one response's output may book. */
const outputShare = 0.5;

interface PriceTable {
  models: Record<string, { aliases?: string[]; output_usd_per_mtok: number }>;
}

// The table fluidbox itself prices with (shared/budget/prices.json), copied
// into the package at build time.
const table = JSON.parse(readFileSync(new URL('./prices.json', import.meta.url), 'utf8')) as PriceTable;

/**
 * The output price in USD per million tokens of model, or, when the model is
 * not given or not in the table, the highest output price in the table: the
 * adapter cannot know which model Claude Code will pick, so it sizes for the
 * dearest.
 */
export function outputRate(model?: string): number {
  let highest = 0;
  for (const [name, p] of Object.entries(table.models)) {
    if (model !== undefined && (name === model || p.aliases?.includes(model))) return p.output_usd_per_mtok;
    highest = Math.max(highest, p.output_usd_per_mtok);
  }
  return highest;
}

/**
 * The output token limit that lets one response book at most half of
 * availableUsd at model's output price, capped at Claude Code's default.
 * Returns 0 when not even a small response fits.
 */
export function outputTokens(availableUsd: number, model?: string): number {
  if (!Number.isFinite(availableUsd) || availableUsd <= 0) return 0;
  const rate = outputRate(model);
  if (rate <= 0) return 0;
  const n = Math.floor((availableUsd * outputShare * 1_000_000) / rate);
  return n < 256 ? 0 : Math.min(n, maxOutputTokensCap);
}
