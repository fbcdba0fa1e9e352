#!/usr/bin/env bash
# kafka.sh - a local Apache Kafka broker for Shoal development and tests.
#
# KRaft mode (broker and controller in one JVM), bound to 127.0.0.1, run from
# the Maven Central jars (no Docker, no tarball). Several brokers can run at
# once as long as each has its own KAFKA_PORT (the data dir is keyed by it).
# By default each broker is a one-node cluster; KAFKA_NODE_ID,
# KAFKA_CONTROLLER_QUORUM and KAFKA_CLUSTER_ID make several of them one
# replicated cluster (start its nodes together: the quorum needs a majority).
#
#   kafka.sh fetch|start|wait|stop|kill|status|reset|help
#   kafka.sh share-group-config <group> [name=value ...]
#
# See README.md next to this file for the environment variables and paths.
set -euo pipefail

readonly KAFKA_VERSION=4.4.0 # keep in step with <kafka.version> in pom.xml

# Resolve our own folder so the script works from any cwd and via symlinks.
SCRIPT_DIR="$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)"
readonly SCRIPT_DIR
# die, need, is_port, now_us, elapsed, port_open, pid_cmdline
# shellcheck source=../lib.sh
source "$SCRIPT_DIR/../lib.sh"

readonly CACHE_ROOT="${SHOAL_CACHE:-$HOME/.cache/shoal}"
# The jar cache is shared by every broker and keyed by version.
readonly DIST_DIR="$CACHE_ROOT/kafka-$KAFKA_VERSION"
readonly LIBS_DIR="$DIST_DIR/libs"
readonly FETCH_MARKER="$DIST_DIR/.fetch-complete"

KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_DATA_DIR="${KAFKA_DATA_DIR:-$CACHE_ROOT/kafka-data-$KAFKA_PORT}"
KAFKA_HEAP="${KAFKA_HEAP:-512m}"
KAFKA_WAIT_S="${KAFKA_WAIT_S:-60}"
KAFKA_STOP_S="${KAFKA_STOP_S:-20}"
KAFKA_OPTS="${KAFKA_OPTS:-}" # extra JVM flags for the broker, word-split
# The collector flags, word-split. The parallel collector costs a small broker 0.79-0.91x the
# CPU per record of upstream kafka-run-class.sh's G1 set (npm run bench:broker-jvm, README
# "Broker JVM"), which KAFKA_GC_OPTS can put back:
# -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
KAFKA_GC_OPTS="${KAFKA_GC_OPTS:--XX:+UseParallelGC}"
# Replicated cluster (all optional; the defaults are a one-node cluster):
# KAFKA_NODE_ID, KAFKA_CONTROLLER_QUORUM (controller.quorum.voters, e.g.
# 1@127.0.0.1:20001,2@127.0.0.1:20003,3@127.0.0.1:20005: every node of a
# cluster gets the same list, and each node is a broker and a voter),
# KAFKA_CLUSTER_ID (one id formatted into every node's data dir), and
# KAFKA_REPLICATION_FACTOR / KAFKA_MIN_ISR (default: the number of voters, at
# most 3, and one less than that, at least 1).
KAFKA_NODE_ID="${KAFKA_NODE_ID:-1}"
KAFKA_CONTROLLER_QUORUM="${KAFKA_CONTROLLER_QUORUM:-$KAFKA_NODE_ID@127.0.0.1:$KAFKA_CONTROLLER_PORT}"
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-}"
# Security variants for tests (both optional; see README.md): KAFKA_EXTRA_PROPERTIES, a file
# appended to the generated server.properties (a later key overrides the template's: extra
# listeners, TLS, SASL), and KAFKA_SCRAM_CREDENTIALS, a file of StorageTool --add-scram values,
# one a line (e.g. SCRAM-SHA-512=[name=alice,password=...]), applied when the data dir is formatted.
KAFKA_EXTRA_PROPERTIES="${KAFKA_EXTRA_PROPERTIES:-}"
KAFKA_SCRAM_CREDENTIALS="${KAFKA_SCRAM_CREDENTIALS:-}"

# Anchor a relative data dir to the caller's cwd: log.dirs and the pid check
# must see one absolute path whatever cwd later commands run from. (No symlink
# resolution on purpose: the path must stay stable even before it exists.)
[[ $KAFKA_DATA_DIR == /* ]] || KAFKA_DATA_DIR="$PWD/$KAFKA_DATA_DIR"
KAFKA_DATA_DIR="${KAFKA_DATA_DIR%/}"
readonly KAFKA_PORT KAFKA_CONTROLLER_PORT KAFKA_DATA_DIR KAFKA_HEAP KAFKA_WAIT_S KAFKA_STOP_S KAFKA_OPTS KAFKA_GC_OPTS
readonly KAFKA_NODE_ID KAFKA_CONTROLLER_QUORUM KAFKA_CLUSTER_ID KAFKA_EXTRA_PROPERTIES KAFKA_SCRAM_CREDENTIALS

readonly PROPS="$KAFKA_DATA_DIR/server.properties"
readonly PID_FILE="$KAFKA_DATA_DIR/kafka.pid"
readonly OUT_FILE="$KAFKA_DATA_DIR/kafka.out"     # JVM stdout/stderr: crashes before log4j is up
readonly SERVER_LOG="$KAFKA_DATA_DIR/server.log"  # log4j 2 (see log4j2.properties)
readonly META_FILE="$KAFKA_DATA_DIR/logs/meta.properties"

log() { printf 'kafka:%s: %s\n' "$KAFKA_PORT" "$*" >&2; }

is_port "$KAFKA_PORT" || die "KAFKA_PORT must be a port number, got '$KAFKA_PORT'"
is_port "$KAFKA_CONTROLLER_PORT" || die "KAFKA_CONTROLLER_PORT must be a port number, got '$KAFKA_CONTROLLER_PORT'"
[[ $KAFKA_PORT != "$KAFKA_CONTROLLER_PORT" ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ"
[[ $KAFKA_WAIT_S =~ ^[0-9]+$ ]] || die "KAFKA_WAIT_S must be whole seconds, got '$KAFKA_WAIT_S'"
[[ $KAFKA_STOP_S =~ ^[0-9]+$ ]] || die "KAFKA_STOP_S must be whole seconds, got '$KAFKA_STOP_S'"
[[ $KAFKA_NODE_ID =~ ^[0-9]+$ ]] || die "KAFKA_NODE_ID must be a whole number, got '$KAFKA_NODE_ID'"
[[ $KAFKA_CONTROLLER_QUORUM =~ ^[0-9]+@[^,@:]+:[0-9]+(,[0-9]+@[^,@:]+:[0-9]+)*$ ]] ||
  die "KAFKA_CONTROLLER_QUORUM must look like 1@127.0.0.1:9093,2@127.0.0.1:9095, got '$KAFKA_CONTROLLER_QUORUM'"
[[ ",$KAFKA_CONTROLLER_QUORUM," == *",$KAFKA_NODE_ID@127.0.0.1:$KAFKA_CONTROLLER_PORT,"* ]] ||
  die "KAFKA_CONTROLLER_QUORUM must list this node as $KAFKA_NODE_ID@127.0.0.1:$KAFKA_CONTROLLER_PORT, got '$KAFKA_CONTROLLER_QUORUM'"
# Kafka's own ids: 16 bytes in URL-safe base64 without padding (a leading '-'
# would read as an option to StorageTool).
[[ -z $KAFKA_CLUSTER_ID || $KAFKA_CLUSTER_ID =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]] ||
  die "KAFKA_CLUSTER_ID must be a Kafka cluster id (22 URL-safe base64 characters), got '$KAFKA_CLUSTER_ID'"
_voters="${KAFKA_CONTROLLER_QUORUM//[!,]/}"
_voters=$((${#_voters} + 1))
KAFKA_REPLICATION_FACTOR="${KAFKA_REPLICATION_FACTOR:-$((_voters < 3 ? _voters : 3))}"
if ! [[ $KAFKA_REPLICATION_FACTOR =~ ^[1-9][0-9]*$ ]] || ((KAFKA_REPLICATION_FACTOR > _voters)); then
  die "KAFKA_REPLICATION_FACTOR must be 1..$_voters (the nodes in KAFKA_CONTROLLER_QUORUM), got '$KAFKA_REPLICATION_FACTOR'"
fi
KAFKA_MIN_ISR="${KAFKA_MIN_ISR:-$((KAFKA_REPLICATION_FACTOR > 1 ? KAFKA_REPLICATION_FACTOR - 1 : 1))}"
if ! [[ $KAFKA_MIN_ISR =~ ^[1-9][0-9]*$ ]] || ((KAFKA_MIN_ISR > KAFKA_REPLICATION_FACTOR)); then
  die "KAFKA_MIN_ISR must be 1..$KAFKA_REPLICATION_FACTOR (KAFKA_REPLICATION_FACTOR), got '$KAFKA_MIN_ISR'"
fi
unset _voters
readonly KAFKA_REPLICATION_FACTOR KAFKA_MIN_ISR

# Prints the broker pid and succeeds if the pid file names a live kafka.Kafka
# JVM started with THIS data dir's server.properties. The command-line check
# guards against pid reuse after a reboot or a crash (never signal a stranger).
running_pid() {
  [[ -f $PID_FILE ]] || return 1
  local pid
  pid="$(<"$PID_FILE")"
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [[ "$(pid_cmdline "$pid")" == *"kafka.Kafka $PROPS"* ]] || return 1
  printf '%s\n' "$pid"
}

# Cluster id recorded by `format` (empty if not formatted yet).
cluster_id() {
  [[ -f $META_FILE ]] || return 0
  sed -n 's/^cluster\.id=//p' "$META_FILE" | head -n 1
}

show_log_tail() {
  if [[ -s $SERVER_LOG ]]; then
    log "last lines of $SERVER_LOG:"
    tail -n 40 "$SERVER_LOG" >&2
  fi
  if [[ -s $OUT_FILE ]]; then
    log "last lines of $OUT_FILE:"
    tail -n 20 "$OUT_FILE" >&2
  fi
}

# --------------------------------------------------------------------- fetch

# The marker records a hash of pom.xml: editing the dependency list re-fetches.
pom_hash() { sha256sum "$SCRIPT_DIR/pom.xml" | cut -d ' ' -f 1; }
fetch_complete() {
  [[ -f $FETCH_MARKER && -d $LIBS_DIR ]] &&
    [[ "$(head -n 1 "$FETCH_MARKER")" == "pom-sha256=$(pom_hash)" ]]
}

cmd_fetch() {
  if fetch_complete; then
    log "jars for Kafka $KAFKA_VERSION already in $LIBS_DIR"
    return 0
  fi
  need mvn "install Maven: apt-get install maven"
  need java "install a JDK 17+: apt-get install openjdk-17-jdk-headless"
  mkdir -p "$DIST_DIR"
  # Two brokers started at once share this cache: let one fetch, the other wait.
  local lock_fd
  exec {lock_fd}>"$DIST_DIR/.fetch.lock"
  flock "$lock_fd"
  if fetch_complete; then # the other one finished while we waited
    exec {lock_fd}>&-
    log "jars for Kafka $KAFKA_VERSION already in $LIBS_DIR"
    return 0
  fi

  # Copy into a scratch folder and swap it in whole, then write the marker:
  # an interrupted fetch never leaves a half-filled libs/ that looks complete.
  local tmp="$DIST_DIR/libs.tmp.$$" mvn_log="$DIST_DIR/fetch.log" t0 rc=0
  t0="$(now_us)"
  rm -rf -- "$tmp"
  log "fetching Kafka $KAFKA_VERSION jars via Maven (once per version; a cold ~/.m2 downloads ~70 MB; full log: $mvn_log)"
  # Maven's per-artifact download lines would be hundreds of lines; show one
  # dot per downloaded artifact plus any warning/error, keep the rest in the log.
  mvn -B -f "$SCRIPT_DIR/pom.xml" -Dlibs.dir="$tmp" validate 2>&1 |
    tee "$mvn_log" |
    awk '/Downloaded from/ { n++; printf "."; fflush(); next }
         /\[(ERROR|WARNING)\]/ { if (n && !nl) { printf "\n"; nl = 1 } print; fflush() }
         END { if (n) printf "\n%d artifacts downloaded\n", n }' >&2 || rc=$?
  if ((rc != 0)) || [[ ! -f $tmp/kafka_2.13-$KAFKA_VERSION.jar ]]; then
    rm -rf -- "$tmp"
    tail -n 30 "$mvn_log" >&2 || true
    die "Maven could not fetch the Kafka jars (exit $rc); see $mvn_log"
  fi
  rm -rf -- "$LIBS_DIR"
  mv -- "$tmp" "$LIBS_DIR"
  local jars
  jars="$(find "$LIBS_DIR" -maxdepth 1 -name '*.jar' | wc -l)"
  printf 'pom-sha256=%s\nkafka=%s\njars=%s\nfetched=%s\n' \
    "$(pom_hash)" "$KAFKA_VERSION" "$jars" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$FETCH_MARKER.tmp"
  mv -- "$FETCH_MARKER.tmp" "$FETCH_MARKER"
  exec {lock_fd}>&-
  log "fetched $jars jars into $LIBS_DIR in $(elapsed "$t0")s"
}

# --------------------------------------------------------------------- start

# One-shot Kafka tool on the cached classpath. Client-style JVM flags: these
# run for a second, so a quick start matters more than peak speed.
kafka_tool() {
  local main="$1"
  shift
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$SCRIPT_DIR/tools-log4j2.properties" \
    -cp "$LIBS_DIR/*" "$main" "$@"
}
storage_tool() { kafka_tool kafka.tools.StorageTool "$@"; }

# server.properties is regenerated on every start so template edits apply;
# the cluster id and data live in logs/, which is never rewritten.
render_properties() {
  local text
  text="$(<"$SCRIPT_DIR/server.properties.template")"
  # Quoted replacements: bash 5.2 would otherwise expand '&' in them.
  text="${text//@KAFKA_PORT@/"$KAFKA_PORT"}"
  text="${text//@KAFKA_CONTROLLER_PORT@/"$KAFKA_CONTROLLER_PORT"}"
  text="${text//@KAFKA_DATA_DIR@/"$KAFKA_DATA_DIR"}"
  text="${text//@KAFKA_NODE_ID@/"$KAFKA_NODE_ID"}"
  text="${text//@KAFKA_CONTROLLER_QUORUM@/"$KAFKA_CONTROLLER_QUORUM"}"
  text="${text//@KAFKA_REPLICATION_FACTOR@/"$KAFKA_REPLICATION_FACTOR"}"
  text="${text//@KAFKA_MIN_ISR@/"$KAFKA_MIN_ISR"}"
  [[ $text != *@KAFKA_*@* ]] || die "unreplaced placeholder in server.properties.template"
  printf '%s\n' "$text" >"$PROPS.tmp"
  if [[ -n $KAFKA_EXTRA_PROPERTIES ]]; then
    [[ -r $KAFKA_EXTRA_PROPERTIES ]] || die "KAFKA_EXTRA_PROPERTIES=$KAFKA_EXTRA_PROPERTIES is not a readable file"
    printf '\n# Appended from KAFKA_EXTRA_PROPERTIES=%s (later keys win)\n' "$KAFKA_EXTRA_PROPERTIES" >>"$PROPS.tmp"
    cat -- "$KAFKA_EXTRA_PROPERTIES" >>"$PROPS.tmp"
  fi
  mv -- "$PROPS.tmp" "$PROPS"
}

# Format once. A restart skips it (saves a JVM start): meta.properties is
# written by format, and `--ignore-formatted` would make it a no-op anyway.
ensure_formatted() {
  [[ -f $META_FILE ]] && return 0
  local id="$KAFKA_CLUSTER_ID"
  if [[ -z $id ]]; then
    id="$(storage_tool random-uuid)" || die "StorageTool random-uuid failed"
    [[ $id =~ ^[A-Za-z0-9_-]{22}$ ]] || die "unexpected cluster id from StorageTool: '$id'"
  fi
  local -a scram=()
  if [[ -n $KAFKA_SCRAM_CREDENTIALS ]]; then
    [[ -r $KAFKA_SCRAM_CREDENTIALS ]] || die "KAFKA_SCRAM_CREDENTIALS=$KAFKA_SCRAM_CREDENTIALS is not a readable file"
    local line
    while IFS= read -r line || [[ -n $line ]]; do
      [[ -z $line ]] || scram+=(--add-scram "$line")
    done <"$KAFKA_SCRAM_CREDENTIALS"
  fi
  log "formatting $KAFKA_DATA_DIR/logs (cluster id $id, $((${#scram[@]} / 2)) SCRAM credential(s))"
  storage_tool format -t "$id" -c "$PROPS" --ignore-formatted "${scram[@]}" >/dev/null ||
    die "StorageTool format failed"
}

launch() {
  local -a extra=()
  [[ -z $KAFKA_OPTS ]] || read -r -a extra <<<"$KAFKA_OPTS"
  local -a gc=()
  read -r -a gc <<<"$KAFKA_GC_OPTS"
  # Fixed heap (Xms=Xmx).
  local -a cmd=(
    java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP"
    -server "${gc[@]}" -Djava.awt.headless=true
    "-Dkafka.logs.dir=$KAFKA_DATA_DIR"
    "-Dlog4j2.configurationFile=$SCRIPT_DIR/log4j2.properties"
    "${extra[@]}"
    -cp "$LIBS_DIR/*" kafka.Kafka "$PROPS"
  )
  printf '=== %s kafka.sh start: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${cmd[*]}" >>"$OUT_FILE"
  rm -f -- "$PID_FILE"
  # setsid: own session, no controlling terminal, so the broker outlives this
  # shell, its terminal and any process-group kill aimed at the caller.
  # The launcher writes its own pid and then execs java, so the pid file holds
  # the JVM's pid whether or not setsid had to fork. It also closes every fd
  # above 2 first: an inherited pipe (a test runner's, `$(...)`) or our start
  # lock held open by a JVM that lives for hours would hang or block callers.
  # shellcheck disable=SC2016 # $$/$1 are for the inner bash
  setsid bash -c '
    for fd in /proc/$$/fd/*; do
      fd=${fd##*/}
      if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then { eval "exec $fd>&-"; } 2>/dev/null || true; fi
    done
    printf "%s\n" "$$" >"$1"
    shift
    exec "$@"
  ' kafka-launcher "$PID_FILE" "${cmd[@]}" </dev/null >>"$OUT_FILE" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s $PID_FILE ]] && return 0
    sleep 0.1
  done
  die "broker did not start (no pid file); see $OUT_FILE"
}

cmd_start() {
  local t0 pid lock_fd
  t0="$(now_us)"
  need java "install a JDK 17+: apt-get install openjdk-17-jdk-headless"
  need node "Node.js runs the readiness probe"
  mkdir -p "$KAFKA_DATA_DIR"
  # Serialise `start` per data dir: a second concurrent start waits, then finds
  # the broker running and returns 0 instead of launching a twin.
  exec {lock_fd}>"$KAFKA_DATA_DIR/.start.lock"
  flock "$lock_fd"

  if pid="$(running_pid)"; then
    if port_open "$KAFKA_PORT"; then
      log "already running (pid $pid) on 127.0.0.1:$KAFKA_PORT, data $KAFKA_DATA_DIR"
      return 0
    fi
    log "broker (pid $pid) is still starting"
    cmd_wait
    return 0
  fi
  if [[ -f $PID_FILE ]]; then
    log "removing stale pid file"
    rm -f -- "$PID_FILE"
  fi
  # Fail clearly instead of letting the JVM die on "Address already in use".
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    if port_open "$p"; then
      die "127.0.0.1:$p is in use by another process (another broker? set KAFKA_PORT / KAFKA_CONTROLLER_PORT)"
    fi
  done

  cmd_fetch
  render_properties
  ensure_formatted
  if [[ -n $KAFKA_CLUSTER_ID && "$(cluster_id)" != "$KAFKA_CLUSTER_ID" ]]; then
    die "$KAFKA_DATA_DIR/logs belongs to cluster $(cluster_id), not KAFKA_CLUSTER_ID=$KAFKA_CLUSTER_ID (reset it?)"
  fi
  launch
  log "started pid $(<"$PID_FILE"), data $KAFKA_DATA_DIR, log $SERVER_LOG"
  cmd_wait
  log "start-to-ready $(elapsed "$t0")s"
}

# ---------------------------------------------------------------------- wait

cmd_wait() {
  need node "Node.js runs the readiness probe"
  local t0 expect rc tracked=0 pid polls=0
  t0="$(now_us)"
  expect="$(cluster_id)"
  # Only watch for an early death if we know which JVM is ours.
  [[ -f $PID_FILE ]] && tracked=1
  printf 'kafka:%s: waiting for 127.0.0.1:%s (up to %ss) ' "$KAFKA_PORT" "$KAFKA_PORT" "$KAFKA_WAIT_S" >&2
  while :; do
    if ((tracked)) && ! pid="$(running_pid)"; then
      printf '\n' >&2
      show_log_tail
      die "broker process exited before becoming ready"
    fi
    if port_open "$KAFKA_PORT"; then
      rc=0
      # env(1): KAFKA_PORT is readonly here, so no `VAR=x cmd` prefix.
      env KAFKA_PORT="$KAFKA_PORT" KAFKA_EXPECT_CLUSTER_ID="$expect" \
        node --disable-warning=TimeoutNegativeWarning "$SCRIPT_DIR/ready.mjs" || rc=$?
      case $rc in
        0)
          printf ' ready (%ss)\n' "$(elapsed "$t0")" >&2
          return 0
          ;;
        2 | 3)
          printf '\n' >&2
          die "readiness probe failed hard (exit $rc, message above)"
          ;;
      esac
    fi
    if (($(now_us) - t0 >= KAFKA_WAIT_S * 1000000)); then
      printf '\n' >&2
      show_log_tail
      die "not ready after ${KAFKA_WAIT_S}s (KAFKA_WAIT_S)"
    fi
    # Poll twice a second (readiness comes ~1 s sooner than with 1 s polls);
    # show a dot per second and the elapsed seconds every 5.
    sleep 0.5
    polls=$((polls + 1))
    if ((polls % 2 == 0)); then
      if ((polls % 10 == 0)); then printf '%ss' "$((polls / 2))" >&2; else printf '.' >&2; fi
    fi
  done
}

# ---------------------------------------------------------------------- stop

cmd_stop() {
  local pid t0
  t0="$(now_us)"
  if ! pid="$(running_pid)"; then
    rm -f -- "$PID_FILE"
    log "not running (data $KAFKA_DATA_DIR)"
    return 0
  fi
  # SIGTERM runs Kafka's shutdown hook (controlled shutdown, flush, close the
  # metadata log) so the next start does not need log recovery.
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((t0 + KAFKA_STOP_S * 1000000))
  while kill -0 "$pid" 2>/dev/null && (($(now_us) < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid still alive after ${KAFKA_STOP_S}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$(($(now_us) + 5000000))
    while kill -0 "$pid" 2>/dev/null && (($(now_us) < deadline)); do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && die "pid $pid survived SIGKILL"
  fi
  rm -f -- "$PID_FILE"
  log "stopped pid $pid in $(elapsed "$t0")s"
}

# ---------------------------------------------------------------------- kill

# SIGKILL, no shutdown hook: a crash as the rest of a replicated cluster sees it
# (for outage tests). The data dir is kept; `start` recovers it.
cmd_kill() {
  local pid t0
  t0="$(now_us)"
  if ! pid="$(running_pid)"; then
    rm -f -- "$PID_FILE"
    log "not running (data $KAFKA_DATA_DIR)"
    return 0
  fi
  kill -KILL "$pid" 2>/dev/null || true
  # Dead once it is a zombie (or gone): how soon it is reaped is up to its
  # parent (init, or a container's pid 1: that took over a second here).
  local deadline=$((t0 + 5000000))
  while running_pid >/dev/null && (($(now_us) < deadline)); do sleep 0.05; done
  running_pid >/dev/null && die "pid $pid survived SIGKILL"
  rm -f -- "$PID_FILE"
  log "killed pid $pid (SIGKILL) in $(elapsed "$t0")s"
}

# -------------------------------------------------------------------- status

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    if port_open "$KAFKA_PORT"; then
      printf 'running (pid %s, 127.0.0.1:%s, data %s)\n' "$pid" "$KAFKA_PORT" "$KAFKA_DATA_DIR"
    else
      printf 'starting (pid %s, 127.0.0.1:%s not open yet, data %s)\n' "$pid" "$KAFKA_PORT" "$KAFKA_DATA_DIR"
    fi
    return 0
  fi
  if port_open "$KAFKA_PORT"; then
    printf 'not running from %s (but 127.0.0.1:%s is in use by another process)\n' "$KAFKA_DATA_DIR" "$KAFKA_PORT"
  else
    printf 'not running (127.0.0.1:%s, data %s)\n' "$KAFKA_PORT" "$KAFKA_DATA_DIR"
  fi
  return 3 # LSB "program is not running"
}

# --------------------------------------------------------------------- reset

cmd_reset() {
  cmd_stop
  if [[ ! -d $KAFKA_DATA_DIR ]]; then
    log "no data dir to delete ($KAFKA_DATA_DIR)"
    return 0
  fi
  # rm -rf on a path from the environment: refuse anything that does not look
  # like a data dir this script created.
  case "$KAFKA_DATA_DIR" in
    "" | / | "$HOME" | "$CACHE_ROOT" | "$DIST_DIR") die "refusing to delete '$KAFKA_DATA_DIR'" ;;
  esac
  if [[ -n "$(ls -A -- "$KAFKA_DATA_DIR")" && ! -f $PROPS && ! -f $KAFKA_DATA_DIR/.start.lock ]]; then
    die "refusing to delete $KAFKA_DATA_DIR: it does not look like a kafka.sh data dir"
  fi
  rm -rf -- "$KAFKA_DATA_DIR"
  log "deleted $KAFKA_DATA_DIR"
}

# ------------------------------------------------------ share-group-config

# Sets a share group's group-level configs (they exist before the group does,
# so workers find them on their first join). Always sets
# share.auto.offset.reset=earliest, because a new share group starts at the
# latest offset and would skip jobs written before its first member joined;
# further name=value pairs (share.record.lock.duration.ms,
# share.delivery.count.limit, share.partition.max.record.locks, ...) are
# passed on. The library (@shoal/kafka-share) does the same through
# IncrementalAlterConfigs; this is the operator's way.
cmd_share_group_config() {
  local group="${1:-}"
  [[ -n $group ]] || die "usage: kafka.sh share-group-config <group> [name=value ...]"
  shift
  local pair configs="share.auto.offset.reset=earliest"
  for pair in "$@"; do
    [[ $pair =~ ^[a-z][a-z0-9._-]*=[^,]+$ ]] || die "expected name=value (no commas), got '$pair'"
    configs+=",$pair"
  done
  cmd_fetch
  port_open "$KAFKA_PORT" || die "no broker on 127.0.0.1:$KAFKA_PORT"
  kafka_tool org.apache.kafka.tools.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
    --entity-type groups --entity-name "$group" --alter --add-config "$configs" >&2 ||
    die "ConfigCommand failed for group $group"
  kafka_tool org.apache.kafka.tools.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
    --entity-type groups --entity-name "$group" --describe
}

usage() {
  cat <<EOF
usage: $(basename -- "$0") <command>

  fetch   download the Kafka $KAFKA_VERSION jars once into $LIBS_DIR
  start   fetch if needed, format, start the broker in the background, wait until ready
  wait    wait until the broker answers (KAFKA_WAIT_S, default 60 s)
  stop    stop the broker (SIGTERM, SIGKILL after KAFKA_STOP_S, default 20 s)
  kill    SIGKILL the broker at once (a crash, for outage tests; data is kept)
  status  print running / not running (exit 0 / 3)
  reset   stop and delete the data dir
  share-group-config <group> [name=value ...]
          set a share group's configs: share.auto.offset.reset=earliest and the
          given ones (e.g. share.record.lock.duration.ms=5000)

env: KAFKA_PORT=$KAFKA_PORT KAFKA_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT KAFKA_HEAP=$KAFKA_HEAP
     KAFKA_DATA_DIR=$KAFKA_DATA_DIR
     SHOAL_CACHE=$CACHE_ROOT
cluster: KAFKA_NODE_ID=$KAFKA_NODE_ID KAFKA_CONTROLLER_QUORUM=$KAFKA_CONTROLLER_QUORUM
     KAFKA_CLUSTER_ID=${KAFKA_CLUSTER_ID:-(random at format)}
     KAFKA_REPLICATION_FACTOR=$KAFKA_REPLICATION_FACTOR KAFKA_MIN_ISR=$KAFKA_MIN_ISR
EOF
}

main() {
  local sub="${1:-help}"
  case "$sub" in
    fetch) cmd_fetch ;;
    start) cmd_start ;;
    wait) cmd_wait ;;
    stop) cmd_stop ;;
    kill) cmd_kill ;;
    status) cmd_status ;;
    reset) cmd_reset ;;
    share-group-config)
      shift
      cmd_share_group_config "$@"
      ;;
    help | -h | --help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
