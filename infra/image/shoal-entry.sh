#!/bin/sh
# The image's entry point (under tini): `gateway`, `worker`, or `health` (exit 0 when the service
# in this container answers /readyz: the HEALTHCHECK of runtimes that want a command, e.g.
# `podman run --health-cmd 'shoal health'`; Kubernetes probes the same paths over HTTP).
set -eu
case "${1:-}" in
gateway | worker)
  # kafkajs 2.2.4 arms negative timers that Node 24 warns about (see e2e/harness/service-process.ts).
  exec node --disable-warning=TimeoutNegativeWarning "/opt/shoal/dist/$1.js"
  ;;
health) exec node /opt/shoal/health.mjs ;;
*)
  echo "usage: shoal gateway|worker|health" >&2
  exit 2
  ;;
esac
