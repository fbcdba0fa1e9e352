import type { Delivery, IntakeHandler } from "./intake.ts";

/**
 * A simulated network between the broker and this worker (`SHOAL_SIM_FETCH_DELAY_MS`, simulated
 * runtimes only, for benchmarks): each record reaches the job lifecycle `delayMs` after the
 * intake took it. A dilated benchmark stretches the devices' time but not Kafka's, so its workers
 * see a queue round trip tens of times shorter against a batch than a real accelerator would; the
 * delay puts Kafka's latency back on the devices' clock.
 *
 * Records on their way count against the room (the worker took them), so the intake does not
 * take more while they travel. One never delivered (the worker stopped first) is never settled,
 * and the intake gives it back as it does any unsettled record.
 */
export function delayedHandler(handler: IntakeHandler, delayMs: number): IntakeHandler {
  let inTransit = 0;
  return {
    deliver(delivery: Delivery) {
      inTransit += 1;
      setTimeout(() => {
        inTransit -= 1;
        handler.deliver(delivery);
      }, delayMs);
    },
    room: (lane) => Math.max(0, handler.room(lane) - inTransit),
    ...(handler.holds ? { holds: (model: string) => handler.holds!(model) } : {}),
  };
}
