/** The part of kafkajs' private request queue (2.2.4) that kafkajs-idle-loop.ts patches. */
declare module "kafkajs/src/network/requestQueue/index.js" {
  export default class RequestQueue {
    constructor(options: {
      maxInFlightRequests?: number | null;
      requestTimeout: number;
      enforceRequestTimeout: boolean;
      clientId: string;
      broker: string;
      logger: unknown;
    });
    pending: unknown[];
    throttledUntil: number;
    throttleCheckTimeoutId: NodeJS.Timeout | null;
    checkPendingRequests(): void;
    scheduleCheckPendingRequests(): void;
    destroy(): void;
  }
}
