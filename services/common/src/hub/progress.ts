import type { HubProgress } from "./download.ts";

const UNITS = ["B", "kB", "MB", "GB", "TB"] as const;

/** Bytes in decimal units with three significant digits: `512 B`, `1.23 MB`. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toPrecision(3)} ${UNITS[unit]}`;
}

/** One progress line: `hf:org/name onnx/model.onnx 12.3 MB / 90.1 MB (13%)`. */
export function formatHubProgress(p: HubProgress): string {
  const percent = p.total === 0 ? 100 : Math.floor((p.bytes / p.total) * 100);
  return `hf:${p.repo} ${p.file} ${formatBytes(p.bytes)} / ${formatBytes(p.total)} (${percent}%)`;
}

/**
 * A progress callback for logs and terminals: writes a formatted line per file at most every
 * `intervalMs` (default 2000), and always the line that completes a file.
 */
export function createProgressPrinter(write: (line: string) => void, options: { intervalMs?: number } = {}): (p: HubProgress) => void {
  const intervalMs = options.intervalMs ?? 2000;
  const last = new Map<string, number>();
  return (p) => {
    const key = `${p.repo}\0${p.file}`;
    const now = performance.now();
    const done = p.bytes >= p.total;
    const previous = last.get(key);
    if (!done && previous !== undefined && now - previous < intervalMs) return;
    last.set(key, now);
    if (done) last.delete(key);
    write(formatHubProgress(p));
  };
}
