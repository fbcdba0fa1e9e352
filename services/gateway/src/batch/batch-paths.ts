/** Paths the Batch API serves: `/v1/files…` and `/v1/batches…`. */
export function isBatchApiPath(pathname: string): boolean {
  return /^\/v1\/(files|batches)(\/|$)/.test(pathname);
}
