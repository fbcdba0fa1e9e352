/**
 * kafkajs 2.2.4 (its last release) keeps a 1 ms timer loop alive on every broker connection that
 * ever queued a request: `checkPendingRequests` always calls `scheduleCheckPendingRequests`, which,
 * with nothing pending and no throttle, computes `throttledUntil (-1) - Date.now()`, a negative
 * delay that Node clamps to 1 ms (and, on Node 24, warns about: TimeoutNegativeWarning). So an
 * idle gateway or worker ran about a thousand timer callbacks a second per connection
 * (kafkajs issues #1556, #1704, #1751; the fixes were never merged).
 *
 * The check exists for two cases, both kept: requests pending (a throttle or the in-flight limit:
 * checked again after CHECK_PENDING_REQUESTS_INTERVAL or when the throttle ends; a fulfilled
 * request checks the queue itself) and a throttle in force. With neither there is nothing to
 * check: a request pushed later is sent at once or schedules its own check.
 */
import RequestQueue from "kafkajs/src/network/requestQueue/index.js";

let patched = false;

/** Stops kafkajs' idle 1 ms loop (see the module comment). Idempotent; kafkajs is pinned to 2.2.4. */
export function stopKafkajsIdleLoop(): void {
  if (patched) return;
  patched = true;
  const proto = RequestQueue.prototype;
  const schedule = proto.scheduleCheckPendingRequests;
  proto.scheduleCheckPendingRequests = function (this: InstanceType<typeof RequestQueue>): void {
    if (this.pending.length === 0 && this.throttledUntil <= Date.now()) return;
    schedule.call(this);
  };
}
