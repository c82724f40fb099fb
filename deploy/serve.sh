#!/usr/bin/env bash
# Serve the app to a whole school without Docker: N replicas of `streamlit run app.py` on local ports, and
# Debian's HAProxy (`apt-get install haproxy`) in front of them on one address. Runs in the foreground;
# Ctrl-C (or SIGTERM) stops the balancer and every replica.
#
#   deploy/serve.sh [N]            N replicas (default 3), the school opens http://<this server>:8080
#
# Environment (all optional):
#   PORT=8080                      where learners connect (BIND=address:port to listen on one address only)
#   FIRST_REPLICA_PORT=8501        replicas listen on 127.0.0.1, ports FIRST_REPLICA_PORT .. +N-1
#   REPLICA_PORTS="p1 p2 ..."      or exactly these ports (then N is their number)
#   RUN_DIR=<temp dir>             replica logs, pid files and the generated servers.cfg
#   PYTHON=python3                 the interpreter that has requirements.txt installed (e.g. a venv's)
#   HAPROXY=/usr/sbin/haproxy      the balancer's executable
#   REDIS_URL=redis://127.0.0.1:6379/0   where the replicas share the rooms of "Ask the class" (a student's
#                                  replica is rarely the teacher's: without it each replica has rooms of its own)
# The balancer's settings are deploy/haproxy.cfg, shared with compose.yaml; its log goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-3}
PORT=${PORT:-8080}
export BIND=${BIND:-:$PORT}
FIRST_REPLICA_PORT=${FIRST_REPLICA_PORT:-8501}
read -r -a PORTS <<< "${REPLICA_PORTS:-$(seq -s ' ' "$FIRST_REPLICA_PORT" $((FIRST_REPLICA_PORT + N - 1)))}"
N=${#PORTS[@]}
RUN_DIR=${RUN_DIR:-$(mktemp -d -t attention-serve.XXXXXX)}
export PYTHON=${PYTHON:-python3}
mkdir -p "$RUN_DIR"
if [[ -z ${REDIS_URL:-} ]] && ((N > 1)); then
  echo "serve.sh: REDIS_URL is not set: \"Ask the class\" works only for students who reach the teacher's replica" >&2
fi

# Debian installs it in /usr/sbin, which is not on an ordinary user's PATH
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
if [[ ! -x $HAPROXY ]]; then
  echo "serve.sh: HAProxy is not installed (Debian/Ubuntu: sudo apt-get install haproxy)" >&2
  exit 1
fi

pids=()
stop_all() {
  trap - EXIT INT TERM
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_all EXIT
trap 'exit 143' INT TERM

# the replicas listen on loopback only: learners reach them through the balancer
for i in $(seq 1 "$N"); do
  port=${PORTS[$((i - 1))]}
  sh deploy/run-replica.sh "$port" 127.0.0.1 > "$RUN_DIR/replica$i.log" 2>&1 &
  pids+=($!)
  echo $! > "$RUN_DIR/replica$i.pid"
done

# open the door once every replica answers its health check (first start imports torch: a few seconds)
checks=()
for i in $(seq 1 "$N"); do checks+=("${PORTS[$((i - 1))]}:${pids[$((i - 1))]}:$RUN_DIR/replica$i.log"); done
"$PYTHON" - "${checks[@]}" <<'PY'
import os, sys, time, urllib.request
deadline = time.monotonic() + 180
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # local: never through a proxy
for check in sys.argv[1:]:
    port, pid, log = check.split(":", 2)
    while True:
        try:
            opener.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
            break
        except OSError:
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                sys.exit(f"serve.sh: the replica on port {port} stopped (port in use?), its log {log}:\n"
                         + open(log, errors="replace").read()[-2000:])
            if time.monotonic() > deadline:
                sys.exit(f"serve.sh: the replica on port {port} did not become healthy in 180 s (log: {log})")
            time.sleep(0.2)
PY

{
  echo "# written by deploy/serve.sh: the replicas it started"
  echo "backend app"
  for i in $(seq 1 "$N"); do
    echo "    server replica$i 127.0.0.1:${PORTS[$((i - 1))]}"
  done
} > "$RUN_DIR/servers.cfg"
"$HAPROXY" -q -c -f deploy/haproxy.cfg -f "$RUN_DIR/servers.cfg"
"$HAPROXY" -db -f deploy/haproxy.cfg -f "$RUN_DIR/servers.cfg" &
pids+=($!)
echo $! > "$RUN_DIR/haproxy.pid"
echo "serve.sh: $N replicas (ports ${PORTS[*]}) behind http://${BIND/#:/localhost:} ; logs and pids in $RUN_DIR" >&2

# run until the balancer stops (or we are told to stop); a replica that dies is routed around
wait "${pids[-1]}"
