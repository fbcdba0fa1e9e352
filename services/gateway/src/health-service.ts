import { EventEmitter, on } from "node:events";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "@shoal/gen/grpc/health/v1/health_pb.ts";

/** Serving status per service name; "" is the whole server. */
export class HealthState {
  private readonly statuses = new Map<string, Status>();
  private readonly events = new EventEmitter();

  constructor(services: readonly string[]) {
    for (const s of ["", ...services]) this.statuses.set(s, Status.NOT_SERVING);
    this.events.setMaxListeners(0);
  }

  /** Sets every known service to one status (the gateway is all-or-nothing). */
  setAll(status: Status): void {
    for (const name of this.statuses.keys()) this.set(name, status);
  }

  set(service: string, status: Status): void {
    if (this.statuses.get(service) === status) return;
    this.statuses.set(service, status);
    this.events.emit("change", service, status);
  }

  get(service: string): Status | undefined {
    return this.statuses.get(service);
  }

  entries(): IterableIterator<[string, Status]> {
    return this.statuses.entries();
  }

  changes(signal: AbortSignal): AsyncIterableIterator<[string, Status]> {
    return on(this.events, "change", { signal }) as AsyncIterableIterator<[string, Status]>;
  }
}

/** The standard grpc.health.v1.Health over a HealthState. */
export function createHealthService(state: HealthState): ServiceImpl<typeof Health> {
  return {
    check(req) {
      const status = state.get(req.service);
      if (status === undefined) throw new ConnectError(`unknown service '${req.service}'`, Code.NotFound);
      return { status };
    },
    list() {
      const statuses: Record<string, { status: Status }> = {};
      for (const [name, status] of state.entries()) statuses[name] = { status };
      return { statuses };
    },
    async *watch(req, ctx) {
      yield { status: state.get(req.service) ?? Status.SERVICE_UNKNOWN };
      try {
        for await (const [service, status] of state.changes(ctx.signal)) {
          if (service === req.service) yield { status };
        }
      } catch (err) {
        if (!ctx.signal.aborted) throw err;
      }
    },
  };
}
