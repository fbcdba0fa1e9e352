import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

/** Debian's chromium (`SHOAL_CHROMIUM` overrides the path). */
export const CHROMIUM = process.env["SHOAL_CHROMIUM"] ?? "/usr/bin/chromium";

/** A headless Chromium on a throwaway profile; `close` ends it and removes the profile. */
export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Debian's chromium under playwright-core: headless, sandbox off (root in CI), nothing phoning home. */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} not found: the browser tests need Debian's chromium. Run the setup: apt-get install -y chromium (as .ci/run does), or set SHOAL_CHROMIUM.`,
    );
  }
  const profile = await mkdtemp(join(tmpdir(), "shoal-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
