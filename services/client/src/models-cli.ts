/**
 * `npm run shoal -- models add|rm|alias|unalias|ls`: the model registry from a shell, over Connect.
 *
 *   npm run shoal -- models ls
 *   npm run shoal -- models add ./models/bge-small --id bge-small [--pool default] [--pinned]
 *   npm run shoal -- models add hf:BAAI/bge-small-en-v1.5@main --id bge-small [--onnx qint8_avx512]
 *   npm run shoal -- models alias embed-default bge-small
 *   npm run shoal -- models unalias embed-default
 *   npm run shoal -- models rm bge-small
 *
 * `--gateway <url>` (default SHOAL_GATEWAY, else http://127.0.0.1:8080); the key from
 * SHOAL_API_KEY (an admin-scoped key to change anything, when the gateway has keys).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";

const USAGE = `usage: npm run shoal -- models <command> [--gateway URL]
  ls                                   list the served models, their source, revision and aliases
  add <folder|hf:org/name[@rev]> [--id ID] [--pool POOL] [--pinned] [--onnx VARIANT]
  rm <id>                              stop serving a model (calls in flight finish)
  alias <alias> <model-or-alias>       point an alias at a model (repointing is atomic)
  unalias <alias>                      remove an alias`;

/** Runs one CLI invocation; returns the process exit code. */
export async function runModelsCli(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      gateway: { type: "string" },
      id: { type: "string" },
      pool: { type: "string" },
      pinned: { type: "boolean" },
      onnx: { type: "string" },
      help: { type: "boolean" },
    },
  });
  const [group, command, ...args] = positionals;
  if (values.help === true || group !== "models" || command === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return values.help === true ? 0 : 2;
  }
  const key = env["SHOAL_API_KEY"];
  const transport = createConnectTransport({
    baseUrl: values.gateway ?? env["SHOAL_GATEWAY"] ?? "http://127.0.0.1:8080",
    httpVersion: "1.1",
    interceptors: key
      ? [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${key}`);
            return next(req);
          },
        ]
      : [],
  });
  const admin = createClient(ModelAdminService, transport);
  const models = createClient(ModelService, transport);
  const need = (n: number): string[] => {
    if (args.length !== n) throw new UsageError(`models ${command}: expected ${n} argument(s)`);
    return args;
  };
  try {
    switch (command) {
      case "ls":
        need(0);
        printModels((await models.listModels({})).models);
        return 0;
      case "add": {
        const [source = ""] = need(1);
        // A folder named relative to here is sent as an absolute path (the gateway needs one).
        const absolute = !source.startsWith("hf:") && existsSync(source) ? resolve(source) : source;
        const t0 = performance.now();
        // A Hub download can take a while: say so before the answer comes.
        if (source.startsWith("hf:")) process.stderr.write(`resolving ${source} (the gateway fetches it into its Hub cache)…\n`);
        const added = await admin.addModel({
          source: absolute,
          id: values.id ?? "",
          pool: values.pool ?? "",
          pinned: values.pinned ?? false,
          onnxVariant: values.onnx ?? "",
        });
        const seconds = ((performance.now() - t0) / 1000).toFixed(2);
        process.stdout.write(`added ${added.model?.id} (revision ${added.model?.revision}, pool ${added.model?.pool}) in ${seconds} s\n`);
        return 0;
      }
      case "rm": {
        const [id = ""] = need(1);
        await admin.removeModel({ id });
        process.stdout.write(`removed ${id}\n`);
        return 0;
      }
      case "alias": {
        const [alias = "", target = ""] = need(2);
        const { model } = await admin.setAlias({ alias, target });
        process.stdout.write(`${alias} → ${model}\n`);
        return 0;
      }
      case "unalias": {
        const [alias = ""] = need(1);
        await admin.removeAlias({ alias });
        process.stdout.write(`removed alias ${alias}\n`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command 'models ${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n${USAGE}\n`);
      return 2;
    }
    const e = ConnectError.from(err);
    process.stderr.write(`${Code[e.code]}: ${e.rawMessage}\n`);
    return 1;
  }
}

class UsageError extends Error {
  override readonly name = "UsageError";
}

function printModels(list: readonly Model[]): void {
  const rows = list.map((m) => [m.id, m.pool, m.revision.slice(0, 12), m.aliases.join(","), m.source || m.origin]);
  const header = ["ID", "POOL", "REVISION", "ALIASES", "SOURCE"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [header, ...rows])
    process.stdout.write(
      `${row
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd()}\n`,
    );
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await runModelsCli(process.argv.slice(2));
