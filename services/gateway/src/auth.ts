import { timingSafeEqual } from "node:crypto";
import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { Health } from "@shoal/gen/grpc/health/v1/health_pb.ts";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import * as reflectionV1 from "@shoal/gen/grpc/reflection/v1/reflection_pb.ts";
import * as reflectionV1alpha from "@shoal/gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { laneFromName, type ServedLane } from "@shoal/common";
import { BEARER_TOKEN, hashApiKey, type ApiKeySpec, type RateSpec } from "./api-keys.ts";
import { echo, PermissionDeniedError, RateLimitedError, UnauthenticatedError } from "./errors.ts";
import { TokenBucket } from "./token-bucket.ts";

/** Who is calling: the tenant of the API key the call presented, and what that key may do. */
export interface Principal {
  readonly tenant: string;
  /** Lane of calls that name none. */
  readonly lane: ServedLane;
  allows(model: string): boolean;
  /** Throws PermissionDeniedError unless the key may use `model` (an empty id is left to validation). */
  authorizeModel(model: string): void;
  /** Whether the key has the `admin` scope (ModelAdminService). */
  readonly admin: boolean;
  /** Charges a call's estimated prompt tokens to the key's token rate; throws RateLimitedError. */
  chargeTokens(tokens: number): void;
}

/** Where the authenticating interceptor leaves the caller for handlers and outer interceptors. */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "shoal.principal" });

/** Who is calling when keys are off: the caller's connection (`address:port`), for fair admission. */
export const callerKey = createContextKey<string>("", { description: "shoal.caller" });

/** The connection a request came on, as admission names callers when keys are off. */
export function connectionOf(socket: { remoteAddress?: string | undefined; remotePort?: number | undefined } | null | undefined): string {
  return `${socket?.remoteAddress ?? "?"}:${socket?.remotePort ?? 0}`;
}

/** Services any caller may use: health checks (load balancers, k8s) and reflection (the schema is public). */
const OPEN_SERVICES = new Set([Health.typeName, reflectionV1.ServerReflection.typeName, reflectionV1alpha.ServerReflection.typeName]);

class KeyPrincipal implements Principal {
  readonly lane: ServedLane;
  private readonly models: ReadonlySet<string> | undefined;
  private readonly requestBucket: TokenBucket | undefined;
  private readonly tokenBucket: TokenBucket | undefined;

  constructor(
    private readonly spec: ApiKeySpec,
    now: () => number,
  ) {
    this.lane = laneFromName(spec.lane) ?? Lane.INTERACTIVE;
    this.models = spec.models === "*" ? undefined : new Set(spec.models);
    this.requestBucket = spec.requests && new TokenBucket(spec.requests.perSecond, spec.requests.burst, now);
    this.tokenBucket = spec.tokens && new TokenBucket(spec.tokens.perSecond, spec.tokens.burst, now);
  }

  get tenant(): string {
    return this.spec.tenant;
  }

  get admin(): boolean {
    return this.spec.scopes?.includes("admin") ?? false;
  }

  allows(model: string): boolean {
    return this.models === undefined || this.models.has(model);
  }

  authorizeModel(model: string): void {
    if (model !== "" && !this.allows(model)) {
      throw new PermissionDeniedError(`tenant '${this.tenant}' may not use model '${echo(model)}' (see ModelService.ListModels)`);
    }
  }

  /** Charges one call to the key's request rate; throws RateLimitedError. */
  chargeRequest(): void {
    const waitMs = this.requestBucket?.take(1) ?? 0;
    if (waitMs > 0) throw new RateLimitedError(`tenant '${this.tenant}': rate limit of ${describe(this.spec.requests, "requests")} reached`, waitMs);
  }

  chargeTokens(tokens: number): void {
    const waitMs = this.tokenBucket?.take(tokens) ?? 0;
    if (waitMs > 0) {
      throw new RateLimitedError(
        `tenant '${this.tenant}': rate limit of ${describe(this.spec.tokens, "tokens")} reached by a call of about ${tokens} tokens`,
        waitMs,
      );
    }
  }
}

function describe(rate: RateSpec | undefined, unit: string): string {
  return rate ? `${rate.perSecond} ${unit}/s (burst ${rate.burst})` : "none";
}

const MISSING = "missing API key: send 'authorization: Bearer <key>'";

/**
 * The configured API keys, held as SHA-256 digests. A presented key is hashed and compared with
 * every stored digest in constant time, so neither the comparison nor the scan order tells how
 * close a guess came. No key configured: authentication is off.
 */
export class ApiKeys {
  private readonly entries: ReadonlyArray<{ readonly sha256: Buffer; readonly principal: KeyPrincipal }>;

  constructor(specs: readonly ApiKeySpec[], now: () => number = () => performance.now()) {
    this.entries = specs.map((spec) => ({ sha256: spec.sha256, principal: new KeyPrincipal(spec, now) }));
  }

  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** The configured tenants (bounded: they come from configuration). */
  get tenants(): string[] {
    return [...new Set(this.entries.map((e) => e.principal.tenant))];
  }

  /**
   * Why `authorization` cannot reach a keyed RPC (the messages `authenticate` throws), or undefined
   * when it carries a configured key; nothing is charged. The HTTP front's check before any body is read.
   */
  refusal(authorization: string | undefined): string | undefined {
    if (!this.enabled) return undefined;
    try {
      if (authorization === undefined || authorization.trim() === "") throw new UnauthenticatedError(MISSING);
      const token = /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
      if (token === undefined || !BEARER_TOKEN.test(token)) throw new UnauthenticatedError("authorization: expected 'Bearer <key>'");
      const digest = hashApiKey(token);
      let found = false;
      for (const entry of this.entries) found = timingSafeEqual(entry.sha256, digest) || found;
      if (!found) throw new UnauthenticatedError("API key not recognised");
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  }

  /** Whether `authorization` carries a configured key (always, when keys are off). */
  recognises(authorization: string | undefined): boolean {
    return this.refusal(authorization) === undefined;
  }

  /**
   * Checks an `authorization` header and charges the key's request rate. Returns the caller, or
   * undefined when authentication is off; throws UnauthenticatedError or RateLimitedError.
   */
  authenticate(authorization: string | null | undefined): Principal | undefined {
    if (!this.enabled) return undefined;
    if (authorization === null || authorization === undefined || authorization.trim() === "") throw new UnauthenticatedError(MISSING);
    const match = /^Bearer +(\S+) *$/i.exec(authorization);
    const token = match?.[1];
    if (token === undefined || !BEARER_TOKEN.test(token)) throw new UnauthenticatedError("authorization: expected 'Bearer <key>'");
    const digest = hashApiKey(token);
    let found: KeyPrincipal | undefined;
    for (const entry of this.entries) {
      if (timingSafeEqual(entry.sha256, digest) && found === undefined) found = entry.principal;
    }
    if (found === undefined) throw new UnauthenticatedError("API key not recognised");
    found.chargeRequest();
    return found;
  }
}

/**
 * Requires an API key on every RPC but health and reflection (and the admin scope on ModelAdminService), and leaves the caller in the call's
 * context values (`principalKey`) for the handlers, the trace and the metrics. Its typed errors go
 * through the one mapping at the edge, so it sits inside `mapErrors`.
 */
export function requireApiKey(keys: ApiKeys): Interceptor {
  return (next) => async (req) => {
    if (OPEN_SERVICES.has(req.service.typeName)) return next(req);
    const principal = keys.authenticate(req.header.get("authorization"));
    if (req.service.typeName === ModelAdminService.typeName && principal?.admin === false) {
      throw new PermissionDeniedError(`tenant '${principal.tenant}' may not change the model registry: its key needs the admin scope (scopes: [admin])`);
    }
    req.contextValues.set(principalKey, principal);
    return next(req);
  };
}
