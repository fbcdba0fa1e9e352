# lib.sh - shell helpers shared by infra/kafka/kafka.sh and infra/jaeger/jaeger.sh.
#
# Sourced, never run. The sourcing script defines log() (its own prefix) before
# it calls die or need.

die() {
  log "error: $*"
  exit 1
}
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH ($2)"; }

# Arithmetic on a non-number would die with a bash error: check first.
is_port() { [[ $1 =~ ^[0-9]+$ ]] && ((1 <= 10#$1 && 10#$1 <= 65535)); }

# Wall-clock microseconds now ($EPOCHREALTIME without its locale-dependent
# decimal separator); $SECONDS only ticks whole seconds, too coarse for a 3 s wait.
now_us() { printf '%s\n' "${EPOCHREALTIME//[!0-9]/}"; }
# Seconds with one decimal since $1 (a now_us value).
elapsed() { awk -v a="$1" -v b="$(now_us)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

# True if something accepts TCP connections on 127.0.0.1:$1. Pure bash
# (/dev/tcp), bounded by timeout so a black-holed port cannot hang us.
# shellcheck disable=SC2016 # $1 is for the inner bash
port_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

# Command line of a pid, NULs turned into spaces ('' if it is gone).
pid_cmdline() {
  if [[ -r /proc/$1/cmdline ]]; then
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true
  else
    ps -ww -o args= -p "$1" 2>/dev/null || true
  fi
}
