import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { kafkaBrokers, writeCatalog } from "./harness/cluster.ts";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { selfSignedCert } from "@shoal/common/self-signed";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { norm } from "./harness/clients.ts";
import { REPO_ROOT, ServiceProcess } from "./harness/service-process.ts";

const run = promisify(execFile);
const API_KEY = `sk-e2e-${randomBytes(12).toString("hex")}`;

/**
 * Extra `podman run` flags this host needs. Inside some sandboxes crun refuses hybrid cgroups and
 * neither runtime may raise rlimits (no CAP_SYS_RESOURCE): then runc with rlimits at or under the
 * current ones works. Probed once with a throwaway container.
 */
async function podmanHostFlags(image: string): Promise<string[]> {
  const candidates = [[], ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]];
  const problems: string[] = [];
  for (const flags of candidates) {
    const ok = await run("podman", ["run", "--rm", ...flags, "--entrypoint", "/usr/bin/true", image]).then(
      () => true,
      (e: { stderr?: string }) => {
        problems.push(`podman run ${flags.join(" ")}: ${e.stderr?.trim()}`);
        return false;
      },
    );
    if (ok) return flags;
  }
  throw new Error(`podman cannot run a container here:\n${problems.join("\n")}`);
}

/** A TCP port free right now on loopback (the worker's admin port must be known to ask its health). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The OCI image (infra/image/build.sh; built once per content hash of its inputs, cached under
 * ~/.cache/shoal/image-cpu-<hash>/) loaded into podman and run as the gateway and a worker:
 * host network, read-only root, /tmp on tmpfs, as its non-root user, against the test's broker.
 */
describe("the OCI image under podman (read-only root, non-root, the k8s base's TLS + keys) serves an Embed through a containerised gateway and worker", () => {
  const tag = randomBytes(4).toString("hex");
  const names = { gateway: `shoal-e2e-gw-${tag}`, worker: `shoal-e2e-w-${tag}` };
  const services: ServiceProcess[] = [];
  let image: string;
  let hostFlags: string[];
  let imageBytes: number;
  let url: string;
  let ca: string;
  let model: string;

  before(async () => {
    const started = performance.now();
    const { stdout } = await run("bash", [join(REPO_ROOT, "infra/image/build.sh")], { maxBuffer: 16 << 20 });
    const dir = stdout.trim().split("\n").pop()!;
    const env = Object.fromEntries(
      (await readFile(join(dir, "image.env"), "utf8"))
        .trim()
        .split("\n")
        .map((l) => l.split("=", 2) as [string, string]),
    );
    imageBytes = Number(env["IMAGE_BYTES"]);
    const loaded = await run("podman", ["load", "-q", "-i", env["IMAGE_ARCHIVE"]!]);
    image = /sha256:([0-9a-f]{64})/.exec(loaded.stdout)?.[1] ?? loaded.stdout.trim().split(/\s+/).pop()!;
    hostFlags = await podmanHostFlags(image);
    process.stderr.write(
      `image ${dir}: ${(imageBytes / 2 ** 20).toFixed(1)} MiB compressed, ready in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
    );

    // The catalog and the models, mounted read-only where the container's user can read them (the
    // host's copies sit under a home the user cannot enter); the catalog names the container's paths.
    const hostCatalog = await writeCatalog(["tiny"], 1, "share");
    const catalog = { pool: hostCatalog.pool, path: join(dirname(hostCatalog.path), "container-catalog.yaml") };
    await writeFile(catalog.path, (await readFile(hostCatalog.path, "utf8")).replaceAll(JSON.stringify(hostCatalog.dirs[0]!), "/models/m0"));
    // The production configuration of infra/k8s/base: TLS, API keys and cluster keys from files
    // mounted read-only at the same paths as the Secrets there.
    const secrets = dirname(hostCatalog.path);
    const tls = selfSignedCert(secrets, "gateway", "DNS:localhost,IP:127.0.0.1");
    ca = await readFile(tls.cert, "utf8");
    await writeFile(join(secrets, "api-keys.yaml"), `keys:\n  - tenant: e2e\n    key: ${API_KEY}\n`);
    await writeFile(join(secrets, "cluster-keys"), `${randomBytes(32).toString("hex")}\n`);
    for (const f of [tls.cert, tls.key, join(secrets, "api-keys.yaml"), join(secrets, "cluster-keys")]) await chmod(f, 0o644); // uid 10001 reads them
    const mounts = [
      ["-v", `${catalog.path}:/etc/shoal/catalog/catalog.yaml:ro`],
      ["-v", `${hostCatalog.dirs[0]!}:/models/m0:ro`],
      ["-v", `${join(secrets, "cluster-keys")}:/etc/shoal/cluster-keys/keys:ro`],
    ].flat();
    const gatewayMounts = [
      ["-v", `${tls.cert}:/etc/shoal/tls/tls.crt:ro`],
      ["-v", `${tls.key}:/etc/shoal/tls/tls.key:ro`],
      ["-v", `${join(secrets, "api-keys.yaml")}:/etc/shoal/api-keys/api-keys.yaml:ro`],
    ].flat();
    const podman = (name: string, env: Record<string, string>, service: "gateway" | "worker"): ServiceProcess =>
      ServiceProcess.spawn(
        name,
        "podman",
        [
          "run",
          "--rm",
          "--name",
          name,
          ...hostFlags,
          "--network=host",
          "--read-only",
          "--tmpfs",
          "/tmp:rw,size=64m",
          ...mounts,
          ...(service === "gateway" ? gatewayMounts : []),
          ...Object.entries({
            KAFKA_BROKERS: kafkaBrokers(),
            SHOAL_CATALOG: "/etc/shoal/catalog/catalog.yaml",
            SHOAL_CLUSTER_KEYS_FILE: "/etc/shoal/cluster-keys/keys",
            LOG_LEVEL: "info",
            ...env,
          }).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
          image,
          service,
        ],
        {},
      );
    const worker = podman(
      names.worker,
      {
        SHOAL_POOL: catalog.pool,
        SHOAL_WORKER_ID: names.worker,
        SHOAL_INFERENCE_THREADS: "1",
        SHOAL_INTRA_OP_THREADS: "1",
        SHOAL_HTTP_PORT: String(await freePort()),
      },
      "worker",
    );
    services.push(worker);
    await worker.waitForLog((l) => l.msg === "worker pulling jobs", 120_000);
    const gateway = podman(
      names.gateway,
      {
        SHOAL_HOST: "0.0.0.0", // off loopback: refused without TLS and API keys
        SHOAL_PORT: String(await freePort()),
        SHOAL_INSTANCE_ID: names.gateway,
        SHOAL_TLS_CERT_FILE: "/etc/shoal/tls/tls.crt",
        SHOAL_TLS_KEY_FILE: "/etc/shoal/tls/tls.key",
        SHOAL_API_KEYS_FILE: "/etc/shoal/api-keys/api-keys.yaml",
      },
      "gateway",
    );
    services.push(gateway);
    const line = await gateway.waitForLog((l) => l.msg === "gateway serving", 120_000);
    url = `https://localhost:${String(line["port"])}`;
    model = (line["models"] as string[])[0]!;
  });

  after(async () => {
    await Promise.all(services.map((s) => s.stop("SIGTERM", 30_000)));
    await run("podman", ["rm", "-f", "--ignore", names.gateway, names.worker]).catch(() => {});
  });

  test("Embed over Connect and gRPC, on TLS with an API key, through the containers", async () => {
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${API_KEY}`);
      return next(req);
    };
    const transports = {
      connect: createConnectTransport({ baseUrl: url, httpVersion: "1.1", nodeOptions: { ca }, interceptors: [auth] }),
      grpc: createGrpcTransport({ baseUrl: url, nodeOptions: { ca }, interceptors: [auth] }),
    };
    for (const transport of Object.values(transports)) {
      const res = await createClient(InferenceService, transport).embed({ model, inputs: ["hello from a container", "goodbye"] });
      assert.equal(res.embeddings.length, 2);
      for (const e of res.embeddings) assert.ok(Math.abs(norm(e.values) - 1) < 1e-5);
      assert.notDeepEqual(res.embeddings[0]!.values, res.embeddings[1]!.values);
    }
    const keyless = createClient(InferenceService, createGrpcTransport({ baseUrl: url, nodeOptions: { ca } }));
    await assert.rejects(keyless.embed({ model, inputs: ["x"] }), (err: unknown) => ConnectError.from(err).code === Code.Unauthenticated);
  });

  test("the services run as uid 10001 on a read-only root, and `shoal health` answers for each", async () => {
    for (const name of [names.gateway, names.worker]) {
      assert.equal((await run("podman", ["exec", name, "id", "-u"])).stdout.trim(), "10001");
      await assert.rejects(run("podman", ["exec", name, "touch", "/opt/shoal/x"]), /Read-only file system/);
      await run("podman", ["exec", name, "touch", "/tmp/x"]); // the one writable place
      await run("podman", ["exec", name, "shoal", "health"]); // exit 0: /readyz answered 200
    }
  });

  test("the compressed image stays small (Debian base + Node 24 + services + onnxruntime)", () => {
    assert.ok(imageBytes > 50 * 2 ** 20 && imageBytes < 200 * 2 ** 20, `${imageBytes} bytes`);
  });

  test("SIGTERM reaches the services through tini and they drain and exit 0", async () => {
    // Last but one: it stops the cluster. podman run proxies the signal to the container's PID 1.
    const codes = await Promise.all([...services].reverse().map((p) => p.stop("SIGTERM", 45_000)));
    assert.deepEqual(codes, [0, 0]);
    for (const p of services)
      assert.ok(
        p.logs.some((l) => l.msg === "stopped"),
        `${p.name} logged "stopped"\n${p.tail(5)}`,
      );
  });

  test("a bad argument gets the entry point's usage, exit code 2", async () => {
    const err = await run("podman", ["run", "--rm", ...hostFlags, "--read-only", image, "serve"]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    assert.equal(err?.code, 2);
    assert.match(err.stderr, /usage: shoal gateway\|worker\|health/);
  });
});
