#!/usr/bin/env bash
# jaeger.sh - a local Jaeger v2 (all-in-one) for Shoal development and tests.
#
# The binary is built from the Go module proxy (no Docker, no GitHub release
# download) once per version and cached outside the clone. It runs with
# config.yaml next to this file: OTLP gRPC/HTTP in, in-memory storage, the
# query API out, every port on 127.0.0.1. Several instances can run at once
# as long as each has its own JAEGER_QUERY_PORT and OTLP ports (the run dir
# and the derived ports are keyed by the query port).
#
#   jaeger.sh build|start|wait|stop|status|help
#
# See README.md next to this file for the environment variables and paths.
set -euo pipefail

# The Go module path has no /v2, so the proxy serves Jaeger v2.x under v1.x
# tags: v1.75.0 is Jaeger v2.12.0. Override only to try another version.
readonly JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_MODULE_VERSION="${JAEGER_MODULE_VERSION:-v1.75.0}"
JAEGER_RELEASE="${JAEGER_RELEASE:-v2.12.0}" # shown by `jaeger version` only
[[ $JAEGER_MODULE_VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "jaeger: JAEGER_MODULE_VERSION must look like v1.75.0, got '$JAEGER_MODULE_VERSION'" >&2; exit 1; }
readonly JAEGER_MODULE_VERSION JAEGER_RELEASE

# Resolve our own folder so the script works from any cwd and via symlinks.
SCRIPT_DIR="$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)"
readonly SCRIPT_DIR
# die, need, is_port, now_us, elapsed, port_open, pid_cmdline
# shellcheck source=../lib.sh
source "$SCRIPT_DIR/../lib.sh"
readonly CONFIG="$SCRIPT_DIR/config.yaml"

readonly CACHE_ROOT="${SHOAL_CACHE:-$HOME/.cache/shoal}"
# The binary is shared by every instance and keyed by version.
readonly BIN_DIR="$CACHE_ROOT/jaeger-$JAEGER_MODULE_VERSION"
readonly BIN="$BIN_DIR/jaeger"
readonly BUILD_MARKER="$BIN_DIR/.build-complete"
readonly BUILD_LOG="$BIN_DIR/build.log"

# Ports. Only the query and OTLP ports are meant to be chosen by hand; the
# others follow the query port so that a second instance needs three vars.
JAEGER_QUERY_PORT="${JAEGER_QUERY_PORT:-16686}"
JAEGER_OTLP_GRPC_PORT="${JAEGER_OTLP_GRPC_PORT:-4317}"
JAEGER_OTLP_HTTP_PORT="${JAEGER_OTLP_HTTP_PORT:-4318}"
is_port "$JAEGER_QUERY_PORT" ||
  { echo "jaeger: JAEGER_QUERY_PORT must be a port number, got '$JAEGER_QUERY_PORT'" >&2; exit 1; }
JAEGER_QUERY_GRPC_PORT="${JAEGER_QUERY_GRPC_PORT:-$((JAEGER_QUERY_PORT - 1))}"
JAEGER_HEALTH_PORT="${JAEGER_HEALTH_PORT:-$((JAEGER_QUERY_PORT + 1))}"
JAEGER_METRICS_PORT="${JAEGER_METRICS_PORT:-$((JAEGER_QUERY_PORT + 2))}"
JAEGER_MAX_TRACES="${JAEGER_MAX_TRACES:-100000}"
JAEGER_LOG_LEVEL="${JAEGER_LOG_LEVEL:-info}"
JAEGER_DATA_DIR="${JAEGER_DATA_DIR:-$CACHE_ROOT/jaeger-run-$JAEGER_QUERY_PORT}"
JAEGER_WAIT_S="${JAEGER_WAIT_S:-60}"
JAEGER_STOP_S="${JAEGER_STOP_S:-10}"

# Anchor a relative run dir to the caller's cwd (see kafka.sh: one absolute
# path whatever cwd later commands run from).
[[ $JAEGER_DATA_DIR == /* ]] || JAEGER_DATA_DIR="$PWD/$JAEGER_DATA_DIR"
JAEGER_DATA_DIR="${JAEGER_DATA_DIR%/}"
# The ports stay writable: stop/status/wait adopt the ones a running instance
# was started with (see adopt_recorded_ports).
readonly JAEGER_MAX_TRACES JAEGER_LOG_LEVEL JAEGER_DATA_DIR JAEGER_WAIT_S JAEGER_STOP_S
# config.yaml reads these through ${env:...}: export the values we checked.
export JAEGER_QUERY_PORT JAEGER_OTLP_GRPC_PORT JAEGER_OTLP_HTTP_PORT JAEGER_QUERY_GRPC_PORT \
  JAEGER_HEALTH_PORT JAEGER_METRICS_PORT JAEGER_MAX_TRACES JAEGER_LOG_LEVEL

readonly PID_FILE="$JAEGER_DATA_DIR/jaeger.pid"
readonly LOG_FILE="$JAEGER_DATA_DIR/jaeger.log" # stdout+stderr (the collector logs to stderr)
readonly PORTS_FILE="$JAEGER_DATA_DIR/ports.env" # the ports the running instance was started with
readonly LOG_ROTATE_BYTES=$((20 * 1024 * 1024))

log() { printf 'jaeger:%s: %s\n' "$JAEGER_QUERY_PORT" "$*" >&2; }

readonly ALL_PORT_VARS=(JAEGER_QUERY_PORT JAEGER_QUERY_GRPC_PORT JAEGER_OTLP_GRPC_PORT
  JAEGER_OTLP_HTTP_PORT JAEGER_HEALTH_PORT JAEGER_METRICS_PORT)
check_settings() {
  local v w
  for v in "${ALL_PORT_VARS[@]}"; do
    is_port "${!v}" || die "$v must be a port number, got '${!v}'"
  done
  for v in "${ALL_PORT_VARS[@]}"; do
    for w in "${ALL_PORT_VARS[@]}"; do
      [[ $v < $w && ${!v} == "${!w}" ]] && die "$v and $w are both ${!v}: each port must differ"
    done
  done
  # The memory store answers HTTP 500 ("search depth must be greater than 0
  # and less than max traces") to a search whose limit exceeds max_traces, and
  # /api/traces defaults to limit=100.
  if [[ ! $JAEGER_MAX_TRACES =~ ^[1-9][0-9]{0,8}$ ]] || ((JAEGER_MAX_TRACES < 100)); then
    die "JAEGER_MAX_TRACES must be a number >= 100 (the default search limit), got '$JAEGER_MAX_TRACES'"
  fi
  [[ $JAEGER_LOG_LEVEL =~ ^(debug|info|warn|error)$ ]] || die "JAEGER_LOG_LEVEL must be debug|info|warn|error, got '$JAEGER_LOG_LEVEL'"
  [[ $JAEGER_WAIT_S =~ ^[0-9]+$ ]] || die "JAEGER_WAIT_S must be whole seconds, got '$JAEGER_WAIT_S'"
  [[ $JAEGER_STOP_S =~ ^[0-9]+$ ]] || die "JAEGER_STOP_S must be whole seconds, got '$JAEGER_STOP_S'"
  return 0
}
check_settings

# HTTP status code of a request (000 if nothing answered). Bounded: never hangs.
# --noproxy: an http_proxy in the environment must not swallow 127.0.0.1.
http_code() { curl -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time 3 "$@" 2>/dev/null || true; }

# Prints the pid and succeeds if the pid file names a live jaeger started by
# this script for THIS run dir, so a reused pid is never signalled. The run
# dir is the instance's identity (as the data dir is for kafka.sh): the
# launcher cd's there and /proc shows the cwd (the collector rejects unknown
# --set keys, so the run dir cannot ride on the command line). Any clone's
# jaeger.sh thus sees an instance another clone started for the same run dir.
# Without /proc, the command line must name this clone's config instead.
running_pid() {
  [[ -f $PID_FILE ]] || return 1
  local pid cwd cmdline
  pid="$(<"$PID_FILE")"
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  cmdline="$(pid_cmdline "$pid")"
  [[ $cmdline == *"/jaeger --config="* ]] || return 1
  if cwd="$(readlink -- "/proc/$pid/cwd" 2>/dev/null)"; then
    [[ $cwd == "$(readlink -f -- "$JAEGER_DATA_DIR")" ]] || return 1
  else
    # (pid_cmdline ends in a space: the NUL after the last argument.)
    [[ $cmdline == *"/jaeger --config=$CONFIG " ]] || return 1
  fi
  printf '%s\n' "$pid"
}

# True while pid $1 exists and is not a zombie. Jaeger is reparented to
# whatever reaps orphans here (init, a container's PID 1), which may take a
# second or two to reap it; kill -0 succeeds on a zombie, so check the state.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0 # no /proc: trust kill -0
  stat="${stat##*) }"
  [[ ${stat:0:1} != Z ]]
}

show_log_tail() {
  if [[ -s $LOG_FILE ]]; then
    log "last lines of $LOG_FILE:"
    tail -n 25 "$LOG_FILE" >&2
  fi
}

write_ports() {
  local v
  for v in "${ALL_PORT_VARS[@]}"; do printf '%s=%s\n' "$v" "${!v}"; done >"$PORTS_FILE.tmp"
  mv -- "$PORTS_FILE.tmp" "$PORTS_FILE"
}

# The run dir is keyed by the query port alone, so `JAEGER_QUERY_PORT=26686
# jaeger.sh status` must not probe the default OTLP ports (another instance may
# own them and answer); with JAEGER_DATA_DIR set, not even the query port is
# known. Load the ports recorded at start into the variables (the run dir is
# already fixed); print "VAR=recorded (requested X)" for each that differed.
adopt_recorded_ports() {
  [[ -f $PORTS_FILE ]] || return 0
  local k v w known
  while IFS='=' read -r k v; do
    known=0
    for w in "${ALL_PORT_VARS[@]}"; do [[ $k == "$w" ]] && known=1; done
    if ((!known)) || ! is_port "$v"; then continue; fi
    if [[ ${!k} != "$v" ]]; then
      printf '%s=%s (requested %s)\n' "$k" "$v" "${!k}"
      printf -v "$k" '%s' "$v"
    fi
  done <"$PORTS_FILE"
}

# --------------------------------------------------------------------- build

build_complete() {
  [[ -f $BUILD_MARKER && -x $BIN ]] &&
    [[ "$(head -n 1 "$BUILD_MARKER")" == "module=$JAEGER_MODULE@$JAEGER_MODULE_VERSION" ]]
}

# Replace directives of the Jaeger module's own go.mod ($1), one
# "old[@v]=new[@v]" per line. `go install pkg@version` refuses a module with
# replace directives; building from a wrapper module works, but the wrapper
# must carry the same replacements or it resolves different dependencies
# (v1.75.0 pins github.com/Shopify/sarama to v1.33.0 this way). Local-path
# replacements cannot apply outside Jaeger's repo and are skipped.
module_replaces() {
  # shellcheck disable=SC2016 # awk program
  awk '
    function emit(line,   parts, lhs, rhs, n, m, l, r) {
      sub(/\/\/.*/, "", line)
      if (split(line, parts, /=>/) != 2) return
      n = split(parts[1], lhs, " "); m = split(parts[2], rhs, " ")
      if (n < 1 || m < 1) return
      if (rhs[1] ~ /^(\.|\/)/) { print "skip " line > "/dev/stderr"; return }
      l = lhs[1]; if (n >= 2) l = l "@" lhs[2]
      r = rhs[1]; if (m >= 2) r = r "@" rhs[2]
      print l "=" r
    }
    /^replace[ \t]*\($/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    block { emit($0); next }
    /^replace[ \t]/ { sub(/^replace[ \t]+/, ""); emit($0) }
  ' "$1"
}

# Run one build step: its output goes to the build log, progress to stderr.
# $1 = label, $2 = awk program turning output lines into progress, rest = cmd.
step() {
  local label="$1" prog="$2" t rc=0
  shift 2
  t="$(now_us)"
  log "$label"
  printf '\n=== %s: %s\n' "$label" "$*" >>"$BUILD_LOG"
  "$@" 2>&1 | tee -a "$BUILD_LOG" | awk -v t0="$t" "$prog" >&2 || rc=$?
  if ((rc != 0)); then
    log "last lines of $BUILD_LOG:"
    tail -n 30 "$BUILD_LOG" >&2 || true
    return "$rc"
  fi
  log "  done in $(elapsed "$t")s"
}

# Progress filters: one dot per N lines of a kind, a count at the end.
# shellcheck disable=SC2016 # awk programs
readonly DOWNLOAD_PROGRESS='
  /^go: downloading / { n++; if (n % 10 == 0) { printf "."; fflush() } next }
  /^go: (added|upgraded|finding) / || /^go: to switch to the latest/ || /^\tgo get / || /^$/ { next }
  /^go: warning: .*retracted/ { if (n && !nl) { printf "\n"; nl = 1 } sub(/^go: warning: /, "  note (harmless, pinned upstream): "); print; fflush(); next }
  /^go: / || /error|cannot|invalid|missing/ { if (n && !nl) { printf "\n"; nl = 1 } print; fflush() }
  END { if (n) printf "\n  %d modules downloaded\n", n }'
# go build -v prints each package as it is built; every 100 show the count and
# the elapsed time (a cold build of ~1,800 packages takes minutes on 2 cores).
# shellcheck disable=SC2016 # awk program
readonly BUILD_PROGRESS='
  function now(  c, t) { c = "date +%s%6N"; c | getline t; close(c); return t }
  /^go: downloading / { d++; next }
  /^[A-Za-z0-9._~\/-]+$/ { n++; if (n % 100 == 0) { printf "  %d packages built (%.0fs)\n", n, (now() - t0) / 1e6; fflush() } next }
  { print; fflush() }
  END { printf "  %d packages built%s\n", n, d ? sprintf(", %d more modules downloaded", d) : "" }'

cmd_build() {
  if build_complete; then
    log "jaeger $JAEGER_RELEASE ($JAEGER_MODULE@$JAEGER_MODULE_VERSION) already built: $BIN"
    return 0
  fi
  need go "install Go 1.24.6+ (Jaeger v2.12.0's go.mod minimum)"
  mkdir -p "$BIN_DIR"
  # Two instances started at once share this cache: let one build, the other wait.
  local lock_fd
  exec {lock_fd}>"$BIN_DIR/.build.lock"
  if ! flock -n "$lock_fd"; then
    log "another build of $JAEGER_MODULE_VERSION is running; waiting for it"
    flock "$lock_fd"
  fi
  if build_complete; then
    exec {lock_fd}>&-
    log "jaeger $JAEGER_RELEASE already built: $BIN"
    return 0
  fi

  local t0 work rc=0 gomod line n_repl=0 gover
  t0="$(now_us)"
  gover="$(go env GOVERSION)"
  # The wrapper module lives in the cache, not under /tmp: HOME may be the
  # only writable place. Go's own scratch dir follows TMPDIR: move it too if
  # TMPDIR is not writable. GOPATH / GOMODCACHE / GOCACHE stay Go's defaults
  # (under $HOME) or whatever the caller set.
  work="$BIN_DIR/build.tmp.$$"
  rm -rf -- "$work" "$BIN_DIR"/build.tmp.* "$BIN.tmp"
  mkdir -p "$work/tmp"
  : >"$BUILD_LOG"
  log "building jaeger $JAEGER_RELEASE from $JAEGER_MODULE@$JAEGER_MODULE_VERSION with $gover (once per version; a cold Go cache takes several minutes and ~2 GB; full log: $BUILD_LOG)"
  log "GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE) GOPROXY=$(go env GOPROXY)"

  (
    cd -- "$work"
    # (In this subshell only: Jaeger itself must not inherit these.)
    local tmp="${TMPDIR:-/tmp}"
    if [[ ! -d $tmp || ! -w $tmp ]]; then
      export TMPDIR="$work/tmp"
    fi
    # GOFLAGS from the caller (e.g. -mod=vendor) would break a wrapper module.
    export GOFLAGS=-buildvcs=false GO111MODULE=on
    step "[1/4] wrapper module local/jaegertool" '/^go: (creating|to add)/ || /^\t/ { next } { print }' \
      go mod init local/jaegertool
    step "[2/4] fetching $JAEGER_MODULE@$JAEGER_MODULE_VERSION" "$DOWNLOAD_PROGRESS" \
      go mod download -json "$JAEGER_MODULE@$JAEGER_MODULE_VERSION"
    gomod="$(go mod download -json "$JAEGER_MODULE@$JAEGER_MODULE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -f $gomod ]] || die "no go.mod for $JAEGER_MODULE@$JAEGER_MODULE_VERSION in the module cache"
    while IFS= read -r line; do
      [[ -n $line ]] || continue
      log "  replace ${line/=/ => } (as in Jaeger's go.mod)"
      go mod edit -replace "$line"
      n_repl=$((n_repl + 1))
    done < <(module_replaces "$gomod")
    ((n_repl > 0)) || log "  Jaeger's go.mod has no replace directives"
    step "[3/4] resolving dependencies (go get -tool)" "$DOWNLOAD_PROGRESS" \
      go get -tool "$JAEGER_MODULE/cmd/jaeger@$JAEGER_MODULE_VERSION"
    # -trimpath: no build paths in the binary; -s -w: no symbol/DWARF tables
    # (about a third smaller). The -X sets what `jaeger version` prints.
    local vpkg="$JAEGER_MODULE/internal/version" ldflags="-s -w"
    if [[ -d "$(dirname -- "$gomod")" ]] && go list "$vpkg" >/dev/null 2>&1; then
      ldflags+=" -X $vpkg.latestVersion=$JAEGER_RELEASE -X $vpkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    fi
    step "[4/4] compiling (go build)" "$BUILD_PROGRESS" \
      go build -v -trimpath -ldflags "$ldflags" -o "$BIN.tmp" "$JAEGER_MODULE/cmd/jaeger"
  ) || rc=$?
  if ((rc != 0)); then
    rm -rf -- "$work" "$BIN.tmp"
    die "build failed (exit $rc); see $BUILD_LOG"
  fi
  cp -- "$work/go.mod" "$BIN_DIR/wrapper.go.mod" # a record of what was resolved
  rm -rf -- "$work"
  mv -- "$BIN.tmp" "$BIN"
  printf 'module=%s@%s\nrelease=%s\ngo=%s\nsha256=%s\nbuilt=%s\nseconds=%s\n' \
    "$JAEGER_MODULE" "$JAEGER_MODULE_VERSION" "$JAEGER_RELEASE" "$gover" \
    "$(sha256sum "$BIN" | cut -d ' ' -f 1)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(elapsed "$t0")" \
    >"$BUILD_MARKER.tmp"
  mv -- "$BUILD_MARKER.tmp" "$BUILD_MARKER"
  exec {lock_fd}>&-
  log "built $BIN ($(du -h "$BIN" | cut -f 1)) in $(elapsed "$t0")s"
}

# --------------------------------------------------------------------- start

launch() {
  # Ports and limits reach config.yaml through the environment (exported
  # above). OTEL_* variables meant for Shoal's own services (an exporter
  # endpoint pointing at this very Jaeger, resource attributes) are dropped:
  # Jaeger's OTel SDK parts would read them too.
  local -a cmd=("$BIN" "--config=$CONFIG") unset_otel=() v
  while IFS= read -r v; do
    [[ $v == OTEL_* ]] && unset_otel+=(-u "$v")
  done < <(compgen -e)
  if ((${#unset_otel[@]})); then cmd=(env "${unset_otel[@]}" -- "${cmd[@]}"); fi
  printf '=== %s jaeger.sh start: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${cmd[*]}" >>"$LOG_FILE"
  rm -f -- "$PID_FILE"
  # setsid: own session, no controlling terminal, so Jaeger outlives this shell,
  # its terminal and any process-group kill aimed at the caller. The launcher
  # writes its own pid and then execs, so the pid file holds Jaeger's pid. It
  # closes every fd above 2 first: an inherited pipe (a test runner's, `$(...)`)
  # or our start lock held by a long-lived server would hang or block callers.
  # shellcheck disable=SC2016 # $$/$1 are for the inner bash
  setsid bash -c '
    for fd in /proc/$$/fd/*; do
      fd=${fd##*/}
      if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then { eval "exec $fd>&-"; } 2>/dev/null || true; fi
    done
    cd -- "$2" || exit 1
    printf "%s\n" "$$" >"$1"
    shift 2
    exec "$@"
  ' jaeger-launcher "$PID_FILE" "$JAEGER_DATA_DIR" "${cmd[@]}" </dev/null >>"$LOG_FILE" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s $PID_FILE ]] && return 0
    sleep 0.1
  done
  die "jaeger did not start (no pid file); see $LOG_FILE"
}

cmd_start() {
  local t0 pid lock_fd
  t0="$(now_us)"
  need curl "apt-get install curl"
  need setsid "util-linux"
  [[ -f $CONFIG ]] || die "missing $CONFIG"
  mkdir -p "$JAEGER_DATA_DIR"
  # Serialise `start` per run dir: a concurrent second start waits, then finds
  # Jaeger running and returns 0 instead of launching a twin.
  exec {lock_fd}>"$JAEGER_DATA_DIR/.start.lock"
  flock "$lock_fd"

  if pid="$(running_pid)"; then
    local diff
    diff="$(adopt_recorded_ports)"
    # A caller that asked for other ports would send spans to the wrong place.
    [[ -z $diff ]] || die "already running (pid $pid) with other ports: $(tr '\n' ' ' <<<"$diff")- stop it first or use another JAEGER_QUERY_PORT"
    [[ "$(pid_cmdline "$pid")" == *"--config=$CONFIG "* ]] ||
      log "note: it runs another clone's config ($(pid_cmdline "$pid" | sed 's/.*--config=//')); stop and start to use $CONFIG"
    log "already running (pid $pid): query http://127.0.0.1:$JAEGER_QUERY_PORT, OTLP 127.0.0.1:$JAEGER_OTLP_GRPC_PORT/$JAEGER_OTLP_HTTP_PORT"
    cmd_wait
    return 0
  fi
  if [[ -f $PID_FILE ]]; then
    log "removing stale pid file"
    rm -f -- "$PID_FILE"
  fi
  # Fail clearly instead of letting the collector die on "address already in use".
  local v
  for v in "${ALL_PORT_VARS[@]}"; do
    if port_open "${!v}"; then
      die "127.0.0.1:${!v} ($v) is in use by another process (another Jaeger? set JAEGER_QUERY_PORT / JAEGER_OTLP_GRPC_PORT / JAEGER_OTLP_HTTP_PORT)"
    fi
  done

  cmd_build
  # Keep one previous log: the file is appended to across restarts.
  if [[ -f $LOG_FILE ]] && (($(stat -c %s -- "$LOG_FILE") > LOG_ROTATE_BYTES)); then
    mv -f -- "$LOG_FILE" "$LOG_FILE.1"
  fi
  write_ports
  launch
  log "started pid $(<"$PID_FILE"), log $LOG_FILE"
  cmd_wait
  log "start-to-ready $(elapsed "$t0")s"
}

# ---------------------------------------------------------------------- wait

# Ready = the query API lists services (storage and query are up) AND the
# OTLP/HTTP receiver takes an (empty) export. The OTLP gRPC port is checked
# for a listening socket only (no gRPC client here).
probe_ready() {
  [[ "$(http_code "http://127.0.0.1:$JAEGER_QUERY_PORT/api/services")" == 200 ]] || return 1
  [[ "$(http_code -X POST -H 'Content-Type: application/json' --data '{"resourceSpans":[]}' \
    "http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT/v1/traces")" == 200 ]] || return 1
  port_open "$JAEGER_OTLP_GRPC_PORT"
}

cmd_wait() {
  need curl "apt-get install curl"
  local t0 tracked=0 polls=0
  t0="$(now_us)"
  running_pid >/dev/null && adopt_recorded_ports >/dev/null
  # Only watch for an early death if we know which process is ours.
  [[ -f $PID_FILE ]] && tracked=1
  printf 'jaeger:%s: waiting for http://127.0.0.1:%s/api/services and OTLP 127.0.0.1:%s (up to %ss) ' \
    "$JAEGER_QUERY_PORT" "$JAEGER_QUERY_PORT" "$JAEGER_OTLP_HTTP_PORT" "$JAEGER_WAIT_S" >&2
  while :; do
    if ((tracked)) && ! running_pid >/dev/null; then
      printf '\n' >&2
      show_log_tail
      die "jaeger exited before becoming ready"
    fi
    if probe_ready; then
      printf ' ready (%ss)\n' "$(elapsed "$t0")" >&2
      return 0
    fi
    if (($(now_us) - t0 >= JAEGER_WAIT_S * 1000000)); then
      printf '\n' >&2
      show_log_tail
      ((tracked)) || die "not ready after ${JAEGER_WAIT_S}s (JAEGER_WAIT_S); no jaeger.sh-started process for $JAEGER_DATA_DIR: run \`jaeger.sh start\`"
      die "not ready after ${JAEGER_WAIT_S}s (JAEGER_WAIT_S)"
    fi
    # Poll 5 times a second (Jaeger is usually up in well under a second);
    # a dot per second, the elapsed seconds every 5.
    sleep 0.2
    polls=$((polls + 1))
    if ((polls % 5 == 0)); then
      if ((polls % 25 == 0)); then printf '%ss' "$((polls / 5))" >&2; else printf '.' >&2; fi
    fi
  done
}

# ---------------------------------------------------------------------- stop

cmd_stop() {
  local pid t0
  t0="$(now_us)"
  if pid="$(running_pid)"; then adopt_recorded_ports >/dev/null; fi
  if ! pid="$(running_pid)"; then
    rm -f -- "$PID_FILE"
    log "not running (run dir $JAEGER_DATA_DIR)"
    return 0
  fi
  # SIGTERM: the collector shuts its pipelines and servers down cleanly.
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((t0 + JAEGER_STOP_S * 1000000))
  while alive "$pid" && (($(now_us) < deadline)); do sleep 0.05; done
  if alive "$pid"; then
    log "pid $pid still alive after ${JAEGER_STOP_S}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$(($(now_us) + 5000000))
    while alive "$pid" && (($(now_us) < deadline)); do sleep 0.1; done
    alive "$pid" && die "pid $pid survived SIGKILL"
  fi
  rm -f -- "$PID_FILE"
  log "stopped pid $pid in $(elapsed "$t0")s (in-memory traces are gone)"
}

# -------------------------------------------------------------------- status

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    adopt_recorded_ports >/dev/null
    if probe_ready; then
      printf 'running (pid %s, query http://127.0.0.1:%s, OTLP grpc 127.0.0.1:%s http 127.0.0.1:%s, run dir %s)\n' \
        "$pid" "$JAEGER_QUERY_PORT" "$JAEGER_OTLP_GRPC_PORT" "$JAEGER_OTLP_HTTP_PORT" "$JAEGER_DATA_DIR"
    else
      printf 'starting (pid %s, not answering yet, run dir %s)\n' "$pid" "$JAEGER_DATA_DIR"
    fi
    return 0
  fi
  if port_open "$JAEGER_QUERY_PORT"; then
    printf 'not running from %s (but 127.0.0.1:%s is in use by another process)\n' "$JAEGER_DATA_DIR" "$JAEGER_QUERY_PORT"
  else
    printf 'not running (query port %s, run dir %s)\n' "$JAEGER_QUERY_PORT" "$JAEGER_DATA_DIR"
  fi
  return 3 # LSB "program is not running"
}

usage() {
  cat <<EOF
usage: $(basename -- "$0") <command>

  build   build Jaeger $JAEGER_RELEASE ($JAEGER_MODULE@$JAEGER_MODULE_VERSION) once into $BIN
  start   build if needed, start Jaeger in the background, wait until ready
  wait    wait until the query API and OTLP/HTTP answer (JAEGER_WAIT_S, default 60 s)
  stop    stop Jaeger (SIGTERM, SIGKILL after JAEGER_STOP_S, default 10 s)
  status  print running / not running (exit 0 / 3)

env: JAEGER_QUERY_PORT=$JAEGER_QUERY_PORT JAEGER_OTLP_GRPC_PORT=$JAEGER_OTLP_GRPC_PORT JAEGER_OTLP_HTTP_PORT=$JAEGER_OTLP_HTTP_PORT
     JAEGER_QUERY_GRPC_PORT=$JAEGER_QUERY_GRPC_PORT JAEGER_HEALTH_PORT=$JAEGER_HEALTH_PORT JAEGER_METRICS_PORT=$JAEGER_METRICS_PORT
     JAEGER_MAX_TRACES=$JAEGER_MAX_TRACES JAEGER_DATA_DIR=$JAEGER_DATA_DIR
     SHOAL_CACHE=$CACHE_ROOT
EOF
}

main() {
  local sub="${1:-help}"
  case "$sub" in
    build) cmd_build ;;
    start) cmd_start ;;
    wait) cmd_wait ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    help | -h | --help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

# exit on the same line: a script edited while it runs must not go on reading.
main "$@"; exit
