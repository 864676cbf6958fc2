#!/bin/sh
# Issue 15's idle-connection check, reproducible: a socket-mode agent, a local
# connection that sends nothing (closed after 3 s), and meanwhile a private
# pmcd whose pmcd.conf has a socket line for the agent.  Prints the agent's
# log, what pminfo gets through pmcd, and whether the agent is still alive.
#
#     PY=.venv/bin/python sh scripts/check_idle_connection.sh
#
# Needs real PCP (pmcd, pminfo); run as root (the private pmcd drops to pcp).
# Leaves nothing running: every process it starts is stopped by its pid.
set -u
PY=${PY:-.venv/bin/python}
PMCD=${PMCD:-/usr/lib/pcp/bin/pmcd}
PY=$(command -v "$PY") || exit 1
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac
D=$(mktemp -d /tmp/pmda_py-idle-XXXXXX)
chmod 755 "$D"
cd "$D" || exit 1  # python -m pmda_py imports the package of the interpreter, not one in the cwd
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
PMCDPORT=$(free_port)

echo "== agent: pmda-py run -d 250 -i $PORT --table simple=simple (log $D/pmda.log)"
"$PY" -m pmda_py run -d 250 -i "$PORT" --table simple=simple -l "$D/pmda.log" --state-dir "$D/state" &
AGENT=$!
for _ in $(seq 50); do grep -q listening "$D/pmda.log" 2>/dev/null && break; sleep 0.1; done

echo "== an idle TCP connection to 127.0.0.1:$PORT, closed after 3 s; another held 5 s"
"$PY" -c "import socket, time; s = socket.create_connection(('127.0.0.1', $PORT)); time.sleep(3); s.close()" &
IDLE=$!
"$PY" -c "import socket, time; s = socket.create_connection(('127.0.0.1', $PORT)); time.sleep(5); s.close()" &
IDLE2=$!
sleep 0.5

echo "== a private pmcd on port $PMCDPORT with the line: simple 250 socket inet $PORT"
printf '%s\n' "pmcd 2 dso pmcd_init /var/lib/pcp/pmdas/pmcd/pmda_pmcd.so" "simple 250 socket inet $PORT" \
    "" "[access]" 'allow "local:*" : all;' "allow 127.0.0.1 : all;" > "$D/pmcd.conf"
sed 's/^root {$/root {\n    simple\t250:*:*/' /var/lib/pcp/pmns/root_pmcd > "$D/root"
mkdir "$D/run"
PCP_RUN_DIR="$D/run" PMCD_RESTART_AGENTS=0 "$PMCD" -f -A -i 127.0.0.1 -p "$PMCDPORT" -s "$D/pmcd.socket" \
    -c "$D/pmcd.conf" -n "$D/root" -l "$D/pmcd.log" &
PMCDPID=$!
wait "$IDLE" "$IDLE2"
sleep 1

echo "== pminfo -f simple.numfetch simple.color through the private pmcd"
pminfo -h "127.0.0.1:$PMCDPORT" -f simple.numfetch simple.color 2>&1
if kill -0 "$AGENT" 2>/dev/null; then echo "== agent pid $AGENT: alive"; else echo "== agent pid $AGENT: gone"; fi

kill "$PMCDPID"
wait "$PMCDPID" 2>/dev/null
kill "$AGENT" 2>/dev/null
wait "$AGENT" 2>/dev/null
echo "== agent log"
cat "$D/pmda.log"
echo "== pmcd log, the agent's lines"
grep -i 'simple\|agent' "$D/pmcd.log" | grep -v '^ *$' | head -20
rm -rf "$D"
