import assert from "node:assert/strict";

/**
 * Polls `check` every `everyMs` until it holds or `timeoutMs` passed: a wait on a condition
 * instead of a fixed sleep (fast when the system is fast, patient when the machine is loaded).
 * @returns whether the condition held
 */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() >= until) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** {@link waitFor}, where a check that throws counts as "not yet" (a broker that is partitioned away, say). */
export function eventually(check: () => Promise<boolean>, timeoutMs: number, everyMs = 250): Promise<boolean> {
  return waitFor(() => check().catch(() => false), timeoutMs, everyMs);
}

/** Waits for `ok` (every 50 ms), failing the test with `what` after `timeoutMs`. */
export async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  if (!(await waitFor(ok, timeoutMs))) assert.fail(`timed out waiting for: ${what}`);
}
