import type { LaneName } from "@shoal/common";

/** Limits of one lane, in estimated tokens. */
export interface LaneLimits {
  /** Tokens of calls this gateway replica has enqueued and not yet answered. */
  readonly maxInFlightTokens: number;
  /** Tokens waiting in the lane's topics (consumer lag across the pool's partitions). */
  readonly maxQueuedTokens: number;
}

/** Outcome of `tryAdmit`. */
export type Admit =
  | { readonly ok: true; readonly release: () => void }
  | { readonly ok: false; readonly retryAfterMs: number; readonly reason: "in-flight" | "queued" | "fair-share"; readonly message: string };

const MIN_RETRY_MS = 50;
const MAX_RETRY_MS = 30_000;
/** Used for the retry hint until a throughput has been observed. */
const DEFAULT_TOKENS_PER_SECOND = 5_000;

/**
 * Token-priced admission per lane: a call is admitted while the lane's in-flight tokens at this
 * replica and its queued tokens in Kafka (lag) stay under their limits. The in-flight budget is
 * shared fairly between callers (API key tenants; connections when keys are off): when the lane is
 * full, a caller still below its fair share (the limit ÷ the callers holding tokens, itself
 * included) is admitted — so one greedy caller cannot get others refused — and a caller over its
 * share is refused first. In-flight tokens stay below twice the limit. A refused call gets a retry
 * hint: the time the lane needs, at the throughput observed lately, to drain the excess. Admitted
 * calls are never dropped; this only decides what enters the queue.
 */
export class Admission {
  private readonly inFlight: Record<LaneName, number> = { interactive: 0, batch: 0 };
  /** In-flight tokens per caller, per lane (callers holding none are dropped). */
  private readonly byCaller: Record<LaneName, Map<string, number>> = { interactive: new Map(), batch: new Map() };
  private readonly queued: Record<LaneName, number> = { interactive: 0, batch: 0 };
  private tokensPerSecond = 0;
  private windowStart: number;
  private windowTokens = 0;

  constructor(
    private readonly limits: Record<LaneName, LaneLimits>,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.windowStart = now();
  }

  /** Latest estimate of tokens waiting in a lane's topics (from consumer lag). */
  setQueued(lane: LaneName, tokens: number): void {
    this.queued[lane] = Math.max(0, tokens);
  }

  inFlightTokens(lane: LaneName): number {
    return this.inFlight[lane];
  }

  /** In-flight tokens `caller` holds in `lane`. */
  callerTokens(lane: LaneName, caller: string): number {
    return this.byCaller[lane].get(caller) ?? 0;
  }

  /** Admits a call of `tokens` estimated tokens from `caller` (a tenant, or a connection when keys are off). */
  tryAdmit(lane: LaneName, tokens: number, caller = ""): Admit {
    const limits = this.limits[lane];
    const callers = this.byCaller[lane];
    const held = callers.get(caller) ?? 0;
    const fairShare = limits.maxInFlightTokens / (callers.size + (held > 0 ? 0 : 1));
    const overInFlight = this.inFlight[lane] + tokens - limits.maxInFlightTokens;
    // A single call larger than the whole limit is admitted when the lane is empty, else it could never run.
    if (overInFlight > 0 && this.inFlight[lane] > 0) {
      if (held + tokens > fairShare) {
        const reason = callers.size > (held > 0 ? 1 : 0) ? "fair-share" : "in-flight";
        const message =
          reason === "fair-share"
            ? `${lane} lane: full, and this caller's ${held + tokens} in-flight tokens would exceed its fair share of ${Math.floor(fairShare)} (the limit of ${limits.maxInFlightTokens} ÷ ${Math.round(limits.maxInFlightTokens / fairShare)} callers) at this gateway`
            : `${lane} lane: ${this.inFlight[lane] + tokens} in-flight tokens would exceed the limit of ${limits.maxInFlightTokens} at this gateway`;
        return this.refuse(Math.min(overInFlight, held + tokens - fairShare > 0 ? held + tokens - fairShare : overInFlight), reason, message);
      }
      // Below its fair share: admitted although the lane is full (the greedy callers are refused instead).
    }
    const overQueued = this.queued[lane] + tokens - limits.maxQueuedTokens;
    if (overQueued > 0 && this.queued[lane] > 0) {
      return this.refuse(
        overQueued,
        "queued",
        `${lane} lane: about ${Math.round(this.queued[lane])} tokens already queued exceed the limit of ${limits.maxQueuedTokens}`,
      );
    }
    this.inFlight[lane] += tokens;
    callers.set(caller, held + tokens);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight[lane] -= tokens;
        const left = (callers.get(caller) ?? tokens) - tokens;
        if (left > 0) callers.set(caller, left);
        else callers.delete(caller);
        this.completed(tokens);
      },
    };
  }

  private refuse(excessTokens: number, reason: "in-flight" | "queued" | "fair-share", message: string): Admit {
    const rate = this.tokensPerSecond > 0 ? this.tokensPerSecond : DEFAULT_TOKENS_PER_SECOND;
    const retryAfterMs = Math.round(Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, (excessTokens / rate) * 1000)));
    return { ok: false, retryAfterMs, reason, message };
  }

  /** Throughput over windows of at least one second, smoothed. */
  private completed(tokens: number): void {
    this.windowTokens += tokens;
    const t = this.now();
    const elapsed = t - this.windowStart;
    if (elapsed >= 1_000) {
      const rate = (this.windowTokens / elapsed) * 1000;
      this.tokensPerSecond = this.tokensPerSecond === 0 ? rate : 0.7 * this.tokensPerSecond + 0.3 * rate;
      this.windowStart = t;
      this.windowTokens = 0;
    }
  }
}

/**
 * Tokens of an input as the gateway estimates them without its model's tokenizer: WordPiece
 * vocabularies average about 4 characters per token on English; 3 keeps the estimate on the safe
 * side. Plus the special tokens; capped at the model's limit when truncation is on, and at one
 * token more without it (a longer input is refused by the worker without compute): what one
 * request may hold is bounded by inputs × the model's limit.
 */
export function estimateTokens(inputs: readonly string[], maxSequenceLength: number, truncate: boolean): number {
  let total = 0;
  for (const text of inputs) {
    const t = Math.ceil(text.length / 3) + 2;
    total += Math.min(t, truncate ? maxSequenceLength : maxSequenceLength + 1);
  }
  return total;
}
