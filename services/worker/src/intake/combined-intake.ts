import type { Delivery, JobIntake } from "./intake.ts";

/**
 * Two intakes feeding one worker: the pool's (share or consumer group) and the worker's own
 * routed topics (issue #16). Both hand their records to the same job lifecycle, so a routed job
 * runs through exactly the code a pulled one does. The routed intake may have a room of its own
 * (`routedRoom`): the jobs routed here wait for this worker whatever the shared queue's budget.
 */
export function combineIntakes(primary: JobIntake, routed: JobIntake, routedRoom?: () => number): JobIntake {
  let stopped: Promise<void> | undefined;
  return {
    kind: `${primary.kind}+routed`,
    get inFlight() {
      return primary.inFlight + routed.inFlight;
    },
    get ready() {
      return primary.ready && routed.ready;
    },
    async start(handler) {
      const routedHandler = routedRoom === undefined ? handler : { deliver: (d: Delivery) => handler.deliver(d), room: routedRoom };
      await Promise.all([primary.start(handler), routed.start(routedHandler)]);
    },
    pause() {
      primary.pause();
      routed.pause();
    },
    stop() {
      stopped ??= Promise.all([primary.stop(), routed.stop()]).then(() => undefined);
      return stopped;
    },
  };
}
