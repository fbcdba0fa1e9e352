import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { portIsFree, REPO_ROOT, mustRun, run, step } from "./shell.ts";

const JAEGER_SH = join(REPO_ROOT, "infra/jaeger/jaeger.sh");

/** A throwaway Jaeger (in-memory) for one test or benchmark run. */
export interface ScratchJaeger {
  /** OTLP/HTTP endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly otlpHttp: string;
  /** Query API base, e.g. `${queryUrl}/api/traces/<id>`. */
  readonly queryUrl: string;
  stop(): Promise<void>;
}

/** Starts a Jaeger on a free block of six ports (query ±, health, metrics, OTLP gRPC/HTTP). */
export async function startScratchJaeger(): Promise<ScratchJaeger> {
  let base = 0;
  for (let attempt = 0; attempt < 50 && base === 0; attempt++) {
    const candidate = 30_000 + 8 * Math.floor(Math.random() * 3_000);
    const free = await Promise.all(Array.from({ length: 6 }, (_, i) => portIsFree(candidate + i)));
    if (free.every(Boolean)) base = candidate;
  }
  if (base === 0) throw new Error("no free port block for a scratch Jaeger");
  const dataDir = await mkdtemp(join(tmpdir(), "shoal-jaeger-"));
  const env = {
    ...process.env,
    JAEGER_QUERY_PORT: String(base + 1),
    JAEGER_OTLP_GRPC_PORT: String(base + 4),
    JAEGER_OTLP_HTTP_PORT: String(base + 5),
    JAEGER_DATA_DIR: dataDir,
  };
  step(`scratch Jaeger: query 127.0.0.1:${base + 1}, OTLP/HTTP 127.0.0.1:${base + 5}`);
  await mustRun("bash", [JAEGER_SH, "start"], { env });
  return {
    otlpHttp: `http://127.0.0.1:${base + 5}`,
    queryUrl: `http://127.0.0.1:${base + 1}`,
    async stop() {
      await run("bash", [JAEGER_SH, "stop"], { env });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
