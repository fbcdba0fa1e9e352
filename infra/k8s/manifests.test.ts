import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { before, describe, test } from "node:test";
import { ACCELERATOR_IDLE_TAKE_BATCHES, loadWorkerConfig } from "@shoal/worker/config";
import { ensureKustomize, ensureSchemas } from "./schemas.ts";
import { createValidator, render, type K8sObject, type Validator } from "./validate.ts";

const K8S = import.meta.dirname;
const OVERLAYS = ["cpu", "gpu", "dev"] as const;

interface Container {
  name: string;
  args?: string[];
  env?: Array<{ name: string; value?: string }>;
  readinessProbe?: unknown;
  livenessProbe?: unknown;
  resources?: { requests?: Record<string, unknown>; limits?: Record<string, unknown> };
  securityContext?: { readOnlyRootFilesystem?: boolean };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean };
  containers: Container[];
}
type Deployment = K8sObject & { spec: { selector: { matchLabels: Record<string, string> }; template: { spec: PodSpec } } };

const deployments = (objs: K8sObject[]): Deployment[] => objs.filter((o): o is Deployment => o.kind === "Deployment");
const envOf = (c: Container, name: string): string | undefined => c.env?.find((e) => e.name === name)?.value;

/** The service's drain grace (its config.ts default when the manifest leaves it), in seconds. */
function drainGraceS(c: Container): number {
  const ms = envOf(c, "SHOAL_DRAIN_GRACE_MS") ?? (c.args?.[0] === "worker" ? "20000" : "10000");
  return Number(ms) / 1000;
}

describe("Kubernetes manifests (kustomize overlays, checked against Kubernetes' and KEDA's schemas)", () => {
  let validator: Validator;
  const rendered = new Map<string, K8sObject[]>();
  before(async () => {
    validator = await createValidator(await ensureSchemas());
    const kustomize = await ensureKustomize();
    for (const o of OVERLAYS) rendered.set(o, await render(kustomize, join(K8S, "overlays", o)));
  });

  for (const overlay of OVERLAYS) {
    test(`${overlay}: every object is valid against its schema`, () => {
      const objs = rendered.get(overlay)!;
      assert.ok(objs.length >= 10, `rendered ${objs.length} objects`);
      assert.deepEqual(
        objs.flatMap((o) => validator.check(o)),
        [],
      );
    });

    test(`${overlay}: deployments probe health, request resources, run read-only and non-root, outlast their drain`, () => {
      const deps = deployments(rendered.get(overlay)!);
      assert.ok(deps.length >= 2);
      for (const d of deps) {
        const pod = d.spec.template.spec;
        assert.equal(pod.securityContext?.runAsNonRoot, true, d.metadata.name);
        for (const c of pod.containers) {
          assert.ok(c.readinessProbe && c.livenessProbe, `${d.metadata.name}: probes`);
          assert.ok(c.resources?.requests?.["cpu"] && c.resources.requests["memory"], `${d.metadata.name}: requests`);
          assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${d.metadata.name}: read-only root`);
          const preStopS = Number(c.lifecycle?.preStop?.exec?.command[1] ?? 0);
          // The service exits on its own at most drain grace + 15 s after SIGTERM (run-service.ts).
          const needed = preStopS + drainGraceS(c) + 15;
          assert.ok((pod.terminationGracePeriodSeconds ?? 30) >= needed, `${d.metadata.name}: grace ${pod.terminationGracePeriodSeconds} < ${needed}`);
        }
      }
    });

    test(`${overlay}: each deployment has a disruption budget, each worker pool a KEDA ScaledObject on the queue lag`, () => {
      const objs = rendered.get(overlay)!;
      const pdbs = objs.filter((o) => o.kind === "PodDisruptionBudget") as Array<K8sObject & { spec: { selector: { matchLabels: Record<string, string> } } }>;
      const scaled = objs.filter((o) => o.kind === "ScaledObject") as Array<
        K8sObject & {
          spec: {
            scaleTargetRef: { name: string };
            minReplicaCount: number;
            cooldownPeriod: number;
            triggers: Array<{ type: string; metadata: { query: string } }>;
          };
        }
      >;
      for (const d of deployments(objs)) {
        const labels = d.spec.selector.matchLabels;
        assert.ok(
          pdbs.some((p) => Object.entries(p.spec.selector.matchLabels).every(([k, v]) => labels[k] === v)),
          `${d.metadata.name}: no PodDisruptionBudget`,
        );
        const pool = labels["shoal.dev/pool"];
        if (!pool) continue;
        const so = scaled.find((s) => s.spec.scaleTargetRef.name === d.metadata.name);
        assert.ok(so, `${d.metadata.name}: no ScaledObject`);
        assert.ok(so.spec.minReplicaCount >= 1, "warm replicas");
        assert.ok(so.spec.cooldownPeriod >= 300, "a cooldown longer than a model load");
        const trigger = so.spec.triggers[0]!;
        assert.equal(trigger.type, "prometheus");
        assert.match(trigger.metadata.query, new RegExp(`^max\\(.*shoal_gateway_queue_lag_records\\{pool="${pool}"\\}`));
      }
    });
  }

  test("gpu: the GPU pool asks for nvidia.com/gpu and runs on the CUDA image with the CUDA provider", () => {
    const gpu = deployments(rendered.get("gpu")!).find((d) => d.metadata.name === "shoal-worker-gpu");
    assert.ok(gpu);
    const c = gpu.spec.template.spec.containers[0]!;
    assert.equal(c.resources?.limits?.["nvidia.com/gpu"], 1);
    assert.equal(envOf(c, "SHOAL_EXECUTION_PROVIDER"), "cuda");
    assert.match(String((c as { image?: string }).image), /cuda/);
    // Its literal env, read as the worker reads it (less the files mounted from Secrets, absent here):
    // an accelerator that takes four batches and takes ahead.
    const literal = (c.env ?? []).filter((e) => e.value !== undefined && !e.name.endsWith("_FILE"));
    const env = Object.fromEntries(literal.map((e) => [e.name, e.value]));
    const config = loadWorkerConfig(env);
    assert.ok(config.perCallOverheadTokens >= config.batchMaxTokens, "a GPU call costs more than a batch's tokens");
    assert.equal(config.idleTakeTokens, ACCELERATOR_IDLE_TAKE_BATCHES * config.inferenceThreads * config.batchMaxTokens);
    assert.equal(config.takeAheadMs, "auto");
    assert.equal(
      deployments(rendered.get("cpu")!).find((d) => d.metadata.name === "shoal-worker-gpu"),
      undefined,
    );
  });

  test("cpu: the gateway serves TLS with API keys from Secrets; dev drops both and generates its cluster key", () => {
    const gw = (overlay: string): Container =>
      deployments(rendered.get(overlay)!).find((d) => d.metadata.name === "shoal-gateway")!.spec.template.spec.containers[0]!;
    assert.equal(envOf(gw("cpu"), "SHOAL_TLS_CERT_FILE"), "/etc/shoal/tls/tls.crt");
    assert.equal(envOf(gw("cpu"), "SHOAL_API_KEYS_FILE"), "/etc/shoal/api-keys/api-keys.yaml");
    assert.equal(envOf(gw("dev"), "SHOAL_TLS_CERT_FILE"), undefined);
    assert.equal(envOf(gw("dev"), "SHOAL_INSECURE_PUBLIC"), "1");
    const secret = rendered.get("dev")!.find((o) => o.kind === "Secret");
    assert.match(secret?.metadata.name ?? "", /^shoal-cluster-keys-/);
  });

  test("invalid manifests are refused: a misspelt field, a wrong type, a bad ScaledObject, an unknown kind", () => {
    const objs = rendered.get("cpu")!;
    const clone = <T>(o: T): T => structuredClone(o);
    const gw = clone(deployments(objs).find((d) => d.metadata.name === "shoal-gateway")!);
    const c = gw.spec.template.spec.containers[0]! as Container & Record<string, unknown>;
    c["readinesProbe"] = c.readinessProbe;
    assert.deepEqual(validator.check(gw), ["Deployment/shoal-gateway: /spec/template/spec/containers/0 must NOT have additional properties 'readinesProbe'"]);

    const worker = clone(deployments(objs).find((d) => d.metadata.name === "shoal-worker-cpu")!) as Deployment & { spec: Record<string, unknown> };
    worker.spec["replicas"] = "two";
    assert.ok(validator.check(worker).some((e) => e.includes("/spec/replicas must be integer")));

    const so = clone(objs.find((o) => o.kind === "ScaledObject")!) as K8sObject & { spec: Record<string, unknown> };
    so.spec["cooldown"] = 600;
    delete so.spec["scaleTargetRef"];
    const soErrors = validator.check(so);
    assert.ok(
      soErrors.some((e) => e.includes("must have required property 'scaleTargetRef'")),
      soErrors.join("\n"),
    );
    assert.ok(
      soErrors.some((e) => e.includes("additional properties 'cooldown'")),
      soErrors.join("\n"),
    );

    assert.deepEqual(validator.check({ apiVersion: "apps/v1", kind: "Deploymnet", metadata: { name: "x" } }), [
      "Deploymnet/x: no schema for apps/v1 Deploymnet",
    ]);
  });

  test("an overlay whose patch misspells a probe renders, and fails validation", async () => {
    const dir = await mkdtemp(join(tmpdir(), "shoal-k8s-bad-"));
    try {
      await writeFile(
        join(dir, "kustomization.yaml"),
        `resources: [${JSON.stringify(relative(dir, join(K8S, "overlays/cpu")))}]\npatches:\n  - patch: |\n      - op: add\n        path: /spec/template/spec/containers/0/livenesProbe\n        value: { httpGet: { path: /healthz, port: admin } }\n    target: { kind: Deployment, name: shoal-worker-cpu }\n`,
      );
      const objs = await render(await ensureKustomize(), dir);
      assert.deepEqual(
        objs.flatMap((o) => validator.check(o)),
        ["Deployment/shoal-worker-cpu: /spec/template/spec/containers/0 must NOT have additional properties 'livenesProbe'"],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
