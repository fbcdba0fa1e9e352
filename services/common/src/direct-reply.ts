/**
 * The direct reply path (issue #17): a worker POSTs a job's encoded JobResult to the gateway that
 * holds the call (the address its signed registration on shoal.gateways gives), over h2c, with the
 * result record's signature and trace headers; the reply topic stays the fallback.
 */
export const DIRECT_REPLY_PATH = "/shoal.results";
/** The instance id of the gateway the worker means: another gateway at that address refuses (421). */
export const DIRECT_REPLY_GATEWAY_HEADER = "shoal-gateway";
/** In the gateway's 200: `delivered` (a call was waiting) or `unknown` (a duplicate, or the call left). */
export const DIRECT_REPLY_OUTCOME_HEADER = "shoal-outcome";
