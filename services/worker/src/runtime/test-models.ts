/**
 * Test support: generated model directories (infra/models) and throwaway copies of them.
 * Not a test file itself (no `.test.ts`), imported by the tests beside it.
 */
import { fail } from "node:assert/strict";
import { execFile } from "node:child_process";
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const REPO_ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const ENSURE = join(REPO_ROOT, "infra", "models", "src", "ensure.ts");
const cache = new Map<string, Promise<string>>();

/** Generator presets the runtime tests use (infra/models/src/presets.ts). */
export type TestPreset = "tiny" | "mini" | "tiny-rerank" | "tiny-classify" | "tiny-multilabel";

/**
 * Directory of a generated model preset (`tiny`, `mini`; `tiny-rerank`, `tiny-classify`,
 * `tiny-multilabel` for the task heads), built into the shared cache on first use by the
 * generator's CLI, as a developer would run it.
 */
export function generatedModelDir(preset: TestPreset): Promise<string> {
  let dir = cache.get(preset);
  if (dir === undefined) {
    dir = promisify(execFile)(process.execPath, ["--import", "tsx", ENSURE, "--preset", preset, "--print-path"], {
      cwd: REPO_ROOT,
      maxBuffer: 1 << 20,
    }).then(({ stdout }) => stdout.trim().split("\n").at(-1) ?? "");
    cache.set(preset, dir);
  }
  return dir;
}

/** Copies a model directory into a fresh temp directory; `dispose` removes it. */
export async function copyModelDir(src: string): Promise<{ dir: string; dispose: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "shoal-runtime-test-"));
  await cp(src, dir, { recursive: true });
  return { dir, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** A temp directory for hand-written fixtures; `dispose` removes it. */
export async function tempDir(): Promise<{ dir: string; dispose: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "shoal-runtime-test-"));
  return { dir, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * Deterministic English-like sentences of 1..maxWords words (the generated vocabulary splits
 * words into ~3-letter pieces, so token counts vary widely).
 */
export function sentences(count: number, maxWords: number, seed = 7): string[] {
  const words = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "inference",
    "worker",
    "pulls",
    "jobs",
    "from",
    "kafka",
    "and",
    "batches",
    "them",
    "across",
    "requests",
    "embedding",
    "vectors",
    "are",
    "normalised",
    "before",
    "replying",
    "to",
    "gateway",
    "shoal",
    "fish",
    "swim",
    "together",
    "in",
    "large",
    "groups",
    "near",
    "coral",
    "reefs",
    "tokenizer",
    "splits",
    "words",
    "into",
    "pieces",
  ];
  let state = seed >>> 0;
  const next = (): number => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  return Array.from({ length: count }, () => {
    const n = 1 + Math.floor(next() * maxWords);
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(words[Math.floor(next() * words.length)]!);
    const s = out.join(" ");
    return `${s[0]!.toUpperCase()}${s.slice(1)}.`;
  });
}

/** What `p` rejects with (the test fails if it resolves). */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  fail("expected a rejection");
}
