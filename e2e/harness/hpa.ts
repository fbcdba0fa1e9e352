/**
 * The scaling decision Kubernetes makes for a KEDA ScaledObject with one `AverageValue` trigger
 * (issue #20), as the HPA controller documents it: desired = ceil(metric ÷ target per replica),
 * a 10% tolerance, min/max, the scale-up policy (percent of the replicas at the period's start),
 * the scale-down stabilization window (the highest recommendation in it wins) and the scale-down
 * policy (pods per period). Time is virtual, so a test can run ten minutes of policy in seconds.
 */
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

/** What the decision needs from a ScaledObject. */
export interface ScalerSpec {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** The trigger's `threshold`: metric value per replica. */
  readonly targetPerReplica: number;
  readonly pollingSeconds: number;
  readonly scaleUp: { readonly percent: number; readonly periodSeconds: number; readonly stabilizationSeconds: number };
  readonly scaleDown: { readonly pods: number; readonly periodSeconds: number; readonly stabilizationSeconds: number };
}

interface Policy {
  readonly type: string;
  readonly value: number;
  readonly periodSeconds: number;
}

/** Reads the first ScaledObject of a manifest file (the one kustomize renders from). */
export function readScaledObject(path: string): ScalerSpec {
  const doc = parseAllDocuments(readFileSync(path, "utf8"))
    .map((d) => d.toJS() as { kind?: string; spec?: Record<string, unknown> })
    .find((d) => d.kind === "ScaledObject");
  if (!doc?.spec) throw new Error(`${path}: no ScaledObject`);
  const spec = doc.spec as {
    minReplicaCount: number;
    maxReplicaCount: number;
    pollingInterval?: number;
    triggers: { metricType?: string; metadata: { threshold: string } }[];
    advanced?: { horizontalPodAutoscalerConfig?: { behavior?: Record<"scaleUp" | "scaleDown", { stabilizationWindowSeconds?: number; policies: Policy[] }> } };
  };
  if (spec.triggers.length !== 1 || spec.triggers[0]!.metricType !== "AverageValue") throw new Error(`${path}: expected one AverageValue trigger`);
  const behavior = spec.advanced?.horizontalPodAutoscalerConfig?.behavior;
  const up = behavior?.scaleUp.policies.find((p) => p.type === "Percent");
  const down = behavior?.scaleDown.policies.find((p) => p.type === "Pods");
  if (!up || !down) throw new Error(`${path}: expected a Percent scale-up policy and a Pods scale-down policy`);
  return {
    minReplicas: spec.minReplicaCount,
    maxReplicas: spec.maxReplicaCount,
    targetPerReplica: Number(spec.triggers[0]!.metadata.threshold),
    pollingSeconds: spec.pollingInterval ?? 30,
    scaleUp: { percent: up.value, periodSeconds: up.periodSeconds, stabilizationSeconds: behavior?.scaleUp.stabilizationWindowSeconds ?? 0 },
    scaleDown: { pods: down.value, periodSeconds: down.periodSeconds, stabilizationSeconds: behavior?.scaleDown.stabilizationWindowSeconds ?? 300 },
  };
}

/** The HPA's decisions over virtual time for one scale target. */
export class ReplicaDecider {
  private readonly recommendations: { atS: number; replicas: number }[] = [];
  private readonly changes: { atS: number; delta: number }[] = [];

  constructor(
    private readonly spec: ScalerSpec,
    private replicas: number,
  ) {}

  get current(): number {
    return this.replicas;
  }

  /**
   * One evaluation at virtual time `nowS` with the trigger's metric value.
   * @returns the replica count to run from now on
   */
  decide(nowS: number, metric: number): number {
    const s = this.spec;
    const ratio = metric / (s.targetPerReplica * this.replicas);
    // Within 10% of the target: no change (the HPA's default tolerance).
    let raw = Math.abs(ratio - 1) <= 0.1 ? this.replicas : Math.ceil(metric / s.targetPerReplica);
    raw = Math.min(s.maxReplicas, Math.max(s.minReplicas, raw));
    this.recommendations.push({ atS: nowS, replicas: raw });
    const within = (window: number) => this.recommendations.filter((r) => r.atS > nowS - window || r.atS === nowS).map((r) => r.replicas);
    let next = this.replicas;
    if (raw > this.replicas) {
      // Scale up: the lowest recommendation in the up window, limited to percent of the replicas at the period's start.
      const stabilized = Math.min(...within(s.scaleUp.stabilizationSeconds));
      const addedInPeriod = this.changes.filter((c) => c.atS > nowS - s.scaleUp.periodSeconds && c.delta > 0).reduce((n, c) => n + c.delta, 0);
      const atPeriodStart = this.replicas - addedInPeriod;
      const limit = Math.ceil(atPeriodStart * (1 + s.scaleUp.percent / 100));
      next = Math.max(this.replicas, Math.min(stabilized, limit));
    } else if (raw < this.replicas) {
      // Scale down: the highest recommendation in the down window, at most `pods` removed per period.
      const stabilized = Math.max(...within(s.scaleDown.stabilizationSeconds));
      const removedInPeriod = this.changes.filter((c) => c.atS > nowS - s.scaleDown.periodSeconds && c.delta < 0).reduce((n, c) => n - c.delta, 0);
      const limit = this.replicas - Math.max(0, s.scaleDown.pods - removedInPeriod);
      next = Math.min(this.replicas, Math.max(stabilized, limit));
    }
    if (next !== this.replicas) this.changes.push({ atS: nowS, delta: next - this.replicas });
    this.replicas = next;
    return next;
  }
}
