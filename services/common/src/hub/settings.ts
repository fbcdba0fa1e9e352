import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The Hub's public address: the default when `HF_ENDPOINT` is unset. */
export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";

/** Hub client settings, read from the environment the way huggingface_hub (Python) reads them. */
export interface HubSettings {
  /** `HF_ENDPOINT` without a trailing '/', else the public Hub. */
  readonly endpoint: string;
  /** `HF_TOKEN`, else the file at `HF_TOKEN_PATH`, else `$HF_HOME/token`; undefined when none. */
  readonly token: string | undefined;
  /** `HF_HUB_CACHE`, else `HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`. */
  readonly cacheDir: string;
  /** `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is 1/ON/YES/TRUE: serve from the cache only. */
  readonly offline: boolean;
}

const TRUE_VALUES = new Set(["1", "ON", "YES", "TRUE"]);

/** True for the values huggingface_hub treats as true (1, ON, YES, TRUE; any case). */
export function isTrueEnv(value: string | undefined): boolean {
  return value !== undefined && TRUE_VALUES.has(value.toUpperCase());
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

/** `HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`. */
export function hfHome(env: NodeJS.ProcessEnv = process.env): string {
  return nonEmpty(env.HF_HOME) ?? join(nonEmpty(env.XDG_CACHE_HOME) ?? join(homedir(), ".cache"), "huggingface");
}

/** Strips line breaks and surrounding space, as huggingface_hub does; an empty token is none. */
function cleanToken(token: string | undefined): string | undefined {
  if (token === undefined) return undefined;
  const cleaned = token.replace(/[\r\n]/g, "").trim();
  return cleaned === "" ? undefined : cleaned;
}

function tokenFromFile(path: string): string | undefined {
  try {
    return cleanToken(readFileSync(path, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Reads the Hub settings from `env` (default `process.env`). Reads the token file when `HF_TOKEN` is unset. */
export function readHubSettings(env: NodeJS.ProcessEnv = process.env): HubSettings {
  const home = hfHome(env);
  const token = cleanToken(env.HF_TOKEN) ?? cleanToken(env.HUGGING_FACE_HUB_TOKEN) ?? tokenFromFile(nonEmpty(env.HF_TOKEN_PATH) ?? join(home, "token"));
  return Object.freeze({
    endpoint: (nonEmpty(env.HF_ENDPOINT) ?? DEFAULT_HF_ENDPOINT).replace(/\/+$/, ""),
    token,
    cacheDir: nonEmpty(env.HF_HUB_CACHE) ?? nonEmpty(env.HUGGINGFACE_HUB_CACHE) ?? join(home, "hub"),
    offline: isTrueEnv(env.HF_HUB_OFFLINE) || isTrueEnv(env.TRANSFORMERS_OFFLINE),
  });
}
