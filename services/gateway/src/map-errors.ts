import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "@shoal/common";
import { toConnectError } from "./errors.ts";

/** Maps every error a handler throws to its Connect code, once, at the edge; logs the unexpected. */
export function mapErrors(logger: Logger): Interceptor {
  const log = logger.child({ component: "rpc" });
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      // A caller that resets its HTTP/2 stream aborts the call with the reset code as the reason
      // (INTERNAL_ERROR reads as Internal): the caller left, nothing failed here.
      let mapped = toConnectError(err);
      if (mapped.code === Code.Internal && req.signal.aborted && err === req.signal.reason) {
        mapped = new ConnectError(`caller went away: ${mapped.rawMessage}`, Code.Canceled);
      }
      if (mapped.code === Code.Internal) log.error({ err, method: req.method.name }, "internal error");
      throw mapped;
    }
  };
}
