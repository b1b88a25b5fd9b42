#!/usr/bin/env bash
# A local lancemaster cluster on 127.0.0.1, for trying things out: three
# masters and one backend agent.
#
#   deploy/local/cluster.sh up      start master1..3 and backend1, wait until they answer
#   deploy/local/cluster.sh status  which masters run, and the raft peers
#   deploy/local/cluster.sh down    stop them (TERM, then KILL) and delete the state
#
# It builds nothing: it runs $LANCEMASTER_BIN, or bin/lancemaster of this
# checkout (`make build`; `make demo` does both).
#
# Ports: raft 7101-7103, rpc (admin API, reports) 7201-7203, http 7301-7303,
# backend 7401 (its http 7501).
# State: deploy/local/.state/ (git-ignored): masterN/ is the data dir passed
# as --data-dir, masterN.log the log, masterN.pid the pid, secrets/ the
# secrets dir. Every master runs with deploy/local/ as its working directory,
# so the relative data_dir/secrets_dir in masterN.yaml name the same place
# whether they resolve against the working directory or the config file.
#
# Environment: LANCEMASTER_BIN, LANCEMASTER_START_TIMEOUT (seconds, default
# 60), LANCEMASTER_STOP_TIMEOUT (seconds, default 20).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state="$here/.state"
bin=${LANCEMASTER_BIN:-$root/bin/lancemaster}
start_timeout=${LANCEMASTER_START_TIMEOUT:-60}
stop_timeout=${LANCEMASTER_STOP_TIMEOUT:-20}

masters=(master1 master2 master3)
nodes=(master1 master2 master3 backend1)
rpc_addrs=(127.0.0.1:7201 127.0.0.1:7202 127.0.0.1:7203)
backend_addr=127.0.0.1:7401
all_ports=(7101 7102 7103 7201 7202 7203 7301 7302 7303 7401)
addr_list=$(IFS=,; echo "${rpc_addrs[*]}")

die() { echo "cluster.sh: $*" >&2; exit 1; }

need_bin() {
  [ -x "$bin" ] || die "no lancemaster binary at $bin: run 'make build' or set LANCEMASTER_BIN"
}

# config_of NODE is the node's config file.
config_of() {
  case "$1" in
    backend1) echo "$here/backend.yaml" ;;
    *) echo "$here/$1.yaml" ;;
  esac
}

# pid_of NODE prints the node's pid if it is alive and still our process
# (the pid file may be stale and the pid reused by another process).
pid_of() {
  local pidfile="$state/$1.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--config $(config_of "$1") " || return 1
  echo "$pid"
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# list_peers ADDR [ARGS...] asks one master for the raft configuration.
list_peers() {
  local addr=$1
  shift
  "$bin" --address "$addr" --timeout 3s operator raft list-peers "$@"
}

# ready: every master answers list-peers, one of them knows a leader, and the
# backend accepts connections.
ready() {
  local addr out leader=no
  port_in_use "${backend_addr##*:}" || return 1
  for addr in "${rpc_addrs[@]}"; do
    out=$(list_peers "$addr" -o json 2>/dev/null) || return 1
    if grep -Eq '"leader_id": *"[^"]+"' <<<"$out"; then
      leader=yes
    fi
  done
  [ "$leader" = yes ]
}

show_logs() {
  local node
  for node in "${nodes[@]}"; do
    if [ -f "$state/$node.log" ]; then
      echo "---- last lines of $state/$node.log" >&2
      tail -n 20 "$state/$node.log" >&2
    fi
  done
}

# stop_all sends TERM to every running master, waits up to stop_timeout
# seconds, then KILLs the rest. A leader hands over leadership on TERM.
stop_all() {
  local node pid pids=() waited=0
  for node in "${nodes[@]}"; do
    if pid=$(pid_of "$node"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      echo "stopping $node (pid $pid)"
    fi
  done
  while [ "${#pids[@]}" -gt 0 ] && [ "$waited" -lt $((stop_timeout * 10)) ]; do
    local alive=()
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive+=("$pid"); fi
    done
    pids=("${alive[@]+"${alive[@]}"}")
    [ "${#pids[@]}" -gt 0 ] || break
    sleep 0.1
    waited=$((waited + 1))
  done
  for pid in "${pids[@]+"${pids[@]}"}"; do
    echo "pid $pid did not stop within ${stop_timeout}s: sending KILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
  for node in "${nodes[@]}"; do rm -f "$state/$node.pid"; done
}

cmd_up() {
  need_bin
  local node i port pid
  for node in "${nodes[@]}"; do
    if pid=$(pid_of "$node"); then
      die "$node is already running (pid $pid): run '$0 down' first"
    fi
  done
  for port in "${all_ports[@]}"; do
    if port_in_use "$port"; then
      die "127.0.0.1:$port is already in use; stop whatever listens there first"
    fi
  done

  mkdir -p "$state/secrets"
  chmod 700 "$state" "$state/secrets"
  for i in "${!nodes[@]}"; do
    node=${nodes[$i]}
    mkdir -p "$state/$node"
    # exec: the pid recorded is the process's own, not a subshell's. The
    # trailing --log-format keeps "--config FILE " matchable by pid_of.
    if [ "$node" = backend1 ]; then
      (cd "$here" && exec nohup "$bin" backend --config "$(config_of "$node")" --data-dir "$state/$node" --log-format console) \
        >>"$state/$node.log" 2>&1 </dev/null &
      echo $! >"$state/$node.pid"
      echo "started $node (pid $!, rpc $backend_addr, log $state/$node.log)"
    else
      (cd "$here" && exec nohup "$bin" serve --config "$(config_of "$node")" --data-dir "$state/$node" --log-format console) \
        >>"$state/$node.log" 2>&1 </dev/null &
      echo $! >"$state/$node.pid"
      echo "started $node (pid $!, rpc ${rpc_addrs[$i]}, log $state/$node.log)"
    fi
  done

  # Interrupted while waiting: do not leave half a cluster behind.
  trap 'stop_all; exit 130' INT TERM
  local deadline=$((SECONDS + start_timeout))
  while :; do
    for node in "${nodes[@]}"; do
      if ! pid_of "$node" >/dev/null; then
        show_logs
        stop_all
        die "$node exited during start-up (logs above; state kept in $state)"
      fi
    done
    if ready; then
      break
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      show_logs
      stop_all
      die "the cluster did not answer with a leader within ${start_timeout}s (logs above; state kept in $state)"
    fi
    sleep 0.5
  done
  trap - INT TERM

  echo
  list_peers "$addr_list"
  echo
  echo "The cluster is up (backend at $backend_addr: register it with 'backends add $backend_addr')."
  echo "Point the CLI at it with:"
  echo "export LANCEMASTER_ADDR=$addr_list"
}

cmd_down() {
  stop_all
  # Only delete what this script created, and only below deploy/local/.
  case "$state" in
    "$here"/.state) rm -rf "$state" ;;
    *) die "refusing to delete unexpected state dir $state" ;;
  esac
  echo "stopped; removed $state"
}

cmd_status() {
  local node pid running=0
  for node in "${nodes[@]}"; do
    if pid=$(pid_of "$node"); then
      echo "$node: running (pid $pid)"
      running=$((running + 1))
    else
      echo "$node: not running"
    fi
  done
  [ "$running" -gt 0 ] || return 1
  need_bin
  echo
  list_peers "$addr_list"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
