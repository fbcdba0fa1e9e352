#!/usr/bin/env bash
# smoke.sh - end-to-end check of a running local Jaeger (see jaeger.sh).
#
# Sends one span (service.name "probe", a fresh trace id) as OTLP/HTTP JSON,
# then reads it back through the query API: /api/services, /api/traces?service=
# and /api/traces/{id}. Honours JAEGER_QUERY_PORT and JAEGER_OTLP_HTTP_PORT.
# Exit 0 when the span came back, 1 otherwise. Bounded: every request has a
# timeout, and the read-back is retried for at most 5 s.
set -euo pipefail

query="http://127.0.0.1:${JAEGER_QUERY_PORT:-16686}"
otlp="http://127.0.0.1:${JAEGER_OTLP_HTTP_PORT:-4318}"
service="${JAEGER_SMOKE_SERVICE:-probe}"

fail() {
  printf 'jaeger smoke: FAIL: %s\n' "$*" >&2
  exit 1
}
command -v curl >/dev/null || fail "curl not found"
get() { curl -fsS --noproxy '*' --max-time 5 "$@"; }

trace_id="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
span_id="$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
start_ns="$(date +%s%N)"
end_ns=$((start_ns + 1500000)) # 1.5 ms
payload="$(
  cat <<EOF
{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"$service"}}]},
 "scopeSpans":[{"scope":{"name":"shoal-jaeger-smoke"},"spans":[{"traceId":"$trace_id","spanId":"$span_id",
 "name":"smoke","kind":1,"startTimeUnixNano":"$start_ns","endTimeUnixNano":"$end_ns",
 "attributes":[{"key":"smoke","value":{"boolValue":true}}]}]}]}]}
EOF
)"

code="$(curl -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time 5 \
  -H 'Content-Type: application/json' --data "$payload" "$otlp/v1/traces" || true)"
[[ $code == 200 ]] || fail "POST $otlp/v1/traces answered HTTP $code"

# Without a batch processor the span is stored before the POST returns; the
# retry only covers a config that adds one.
deadline=$((SECONDS + 5))
while :; do
  services="$(get "$query/api/services" 2>/dev/null || true)"
  trace="$(get "$query/api/traces/$trace_id" 2>/dev/null || true)"
  if [[ $services == *"\"$service\""* && $trace == *"\"spanID\":\"$span_id\""* ]]; then break; fi
  ((SECONDS < deadline)) || fail "span $trace_id/$span_id not found via $query (services: ${services:-none})"
  sleep 0.2
done
search="$(get "$query/api/traces?service=$service&limit=20&lookback=1h")" || fail "GET /api/traces?service=$service failed"
[[ $search == *"\"traceID\":\"$trace_id\""* ]] || fail "trace $trace_id missing from /api/traces?service=$service"
printf 'jaeger smoke: ok (trace %s of service "%s" via %s)\n' "$trace_id" "$service" "$query"
