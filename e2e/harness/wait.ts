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
