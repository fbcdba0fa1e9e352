/** Every problem found in a service's configuration, reported at once. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
  }
}

interface IntOptions {
  readonly min?: number;
  readonly max?: number;
}

/**
 * Reads typed values out of an environment map, collecting problems instead of throwing on the
 * first, so that `done()` can report them all together. Unset variables take the given default;
 * a variable set to the empty string counts as unset (no silent `''`).
 */
export class EnvReader {
  private readonly problems: string[] = [];

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  private raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value.trim() === "" ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  optionalString(name: string): string | undefined {
    return this.raw(name);
  }

  int(name: string, fallback: number, opts: IntOptions = {}): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value)) {
      this.problems.push(`${name}=${raw}: expected an integer`);
      return fallback;
    }
    if (opts.min !== undefined && value < opts.min) this.problems.push(`${name}=${raw}: must be >= ${opts.min}`);
    if (opts.max !== undefined && value > opts.max) this.problems.push(`${name}=${raw}: must be <= ${opts.max}`);
    return value;
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    this.problems.push(`${name}=${raw}: expected true or false`);
    return fallback;
  }

  list(name: string, fallback: readonly string[]): readonly string[] {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const items = raw
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
    if (items.length === 0) this.problems.push(`${name}: expected a comma-separated list`);
    return items;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${name}=${raw}: expected one of ${allowed.join(", ")}`);
    return fallback;
  }

  /** Records a problem found by a cross-field check. */
  problem(message: string): void {
    this.problems.push(message);
  }

  /** Throws ConfigError with every problem, or freezes and returns the config. */
  done<T extends object>(config: T): Readonly<T> {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
    return Object.freeze(config);
  }
}
