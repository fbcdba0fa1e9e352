import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";

/** Where the key is kept: this tab's sessionStorage only (gone when the tab closes; never localStorage). */
export const API_KEY_STORAGE_KEY = "shoal.console.apiKey";

/** What may follow "Bearer " (RFC 6750 b64token), as the gateway checks it (services/gateway/src/api-keys.ts). */
const BEARER_TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

/** The part of the Web Storage API the store uses (sessionStorage in the page, a Map in tests). */
export interface KeyStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * The API key the console sends, held in memory and mirrored to sessionStorage so a reload keeps
 * it. Storage may be missing or refuse writes (privacy modes): the key then lasts as long as the
 * page. The key is never logged, rendered or put into an error message.
 */
export class ApiKeyStore {
  private value: string | undefined;
  private readonly listeners = new Set<(key: string | undefined) => void>();

  constructor(private readonly storage: KeyStorage | undefined) {
    try {
      const stored = storage?.getItem(API_KEY_STORAGE_KEY) ?? undefined;
      this.value = stored !== undefined && BEARER_TOKEN.test(stored) ? stored : undefined;
    } catch {
      this.value = undefined;
    }
  }

  /** The key to send, or undefined for none. */
  get key(): string | undefined {
    return this.value;
  }

  /**
   * Sets the key from what was typed: trimmed, a pasted "Bearer " prefix dropped; empty clears it.
   * Returns a problem (and keeps the current key) when it cannot be a key.
   */
  set(typed: string): string | undefined {
    const key = typed.trim().replace(/^bearer\s+/i, "");
    if (key === "") return void this.clear();
    if (!BEARER_TOKEN.test(key)) return "an API key is letters, digits and . _ ~ + / - (no spaces)";
    if (key === this.value) return undefined;
    this.value = key;
    try {
      this.storage?.setItem(API_KEY_STORAGE_KEY, key);
    } catch {
      // Storage full or refused: the key still works for this page.
    }
    this.emit();
    return undefined;
  }

  clear(): void {
    const had = this.value !== undefined;
    this.value = undefined;
    try {
      this.storage?.removeItem(API_KEY_STORAGE_KEY);
    } catch {
      // Nothing stored, nothing to remove.
    }
    if (had) this.emit();
  }

  /** Called after the key changes (set to another value, or cleared). */
  onChange(listener: (key: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(): void {
    for (const l of this.listeners) l(this.value);
  }
}

/** Adds `authorization: Bearer <key>` to every call while a key is set (read per call, so a new key applies at once). */
export function bearerAuth(key: () => string | undefined): Interceptor {
  return (next) => (req) => {
    const k = key();
    if (k !== undefined) req.header.set("authorization", `Bearer ${k}`);
    return next(req);
  };
}

/** An auth failure as the page shows it. */
export interface AuthProblem {
  readonly code: Code.Unauthenticated | Code.PermissionDenied;
  /** One or two words for the key field: "required", "rejected", "not allowed". */
  readonly status: string;
  /** A sentence for the panel that made the call. */
  readonly message: string;
}

/**
 * Unauthenticated and PermissionDenied in words a person can act on; undefined for any other error.
 * `keySet`: whether the call carried a key (no key: the gateway requires one).
 */
export function authProblem(err: unknown, keySet: boolean): AuthProblem | undefined {
  const e = ConnectError.from(err);
  if (e.code === Code.Unauthenticated) {
    return keySet
      ? { code: e.code, status: "rejected", message: `Unauthenticated: the gateway did not accept this API key (${e.rawMessage}). Check the API key field.` }
      : { code: e.code, status: "required", message: "Unauthenticated: this gateway requires an API key. Enter one in the API key field at the top." };
  }
  if (e.code === Code.PermissionDenied) {
    // The gateway says "tenant 't' may not use model 'm' (see ModelService.ListModels)".
    const model = /may not use model '([^']*)'/.exec(e.rawMessage)?.[1];
    const what = model === undefined ? `this call (${e.rawMessage})` : `model '${model}'`;
    return { code: e.code, status: "not allowed", message: `PermissionDenied: this key may not use ${what}.` };
  }
  return undefined;
}
