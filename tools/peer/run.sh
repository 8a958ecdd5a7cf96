#!/bin/bash
# The peer comparison of BENCHMARKS.md: the local server (WAL, then DELETE)
# and envoyproxy/ratelimit on Redis, each driven by wrk with 32 connections
# over 1,000 keys, in ROUNDS rounds (2 unless set) of one run, and a
# summary of each round's ratio to envoy and their median. Everything
# listens on loopback.
#
#   ENVOY_RL=/tmp/envoy-rl-bin/ratelimit LOCAL_API=/tmp/local-api bash tools/peer/run.sh
#
# ENVOY_RL is envoy ratelimit's service binary, built apart (its source is
# not part of this project); LOCAL_API is `go build -o ... ./cmd/local-api`.
# LOCAL_API_BEFORE, if set, is another build of it (an earlier commit's),
# run in each round beside LOCAL_API, so that a change is measured against
# what it changes in the same run. The local server's request log goes to
# a file in the run's directory, as a deployment's would, and each line
# is checked against the database; KEEP=1 keeps that directory. Each run
# prints the CPU a request cost the server (for envoy, envoy and Redis).
set -u
ROUNDS=${ROUNDS:-2}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "ROUNDS: $ROUNDS is not a whole number of rounds from 1" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
cd "$work"
cp "$here"/*.lua .
mkdir -p runtime/ratelimit/config && cp "$here/bench.yaml" runtime/ratelimit/config/
D=${D:-20s}
# REDIS_FSYNC=always makes Redis as durable as the local server in DELETE
# (synchronous=FULL): an append-only file fsynced before the writes of each
# pass of its event loop are answered. Unset, Redis keeps nothing on disk,
# as it is run beside envoy's ratelimit most often; =everysec is its
# default when persistence is on.
persist="--appendonly no"
[ -n "${REDIS_FSYNC:-}" ] && persist="--appendonly yes --appendfsync $REDIS_FSYNC --dir $work"
redis-server --port 6390 --bind 127.0.0.1 --save '' $persist --protected-mode yes > redis.log 2>&1 &
REDIS=$!
env -i PATH="$PATH" HOST=127.0.0.1 PORT=8090 GRPC_HOST=127.0.0.1 GRPC_PORT=8091 DEBUG_HOST=127.0.0.1 DEBUG_PORT=6071 \
  USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6390 \
  RUNTIME_ROOT="$work/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
  "$ENVOY_RL" > envoy.log 2>&1 &
ENVOY=$!
sleep 2
curl -s -XPOST -d '{"domain":"bench","descriptors":[{"entries":[{"key":"client","value":"k0001"}]}]}' http://127.0.0.1:8090/json; echo
# record notes a wrk run's requests a second and p99 (in ms) in results,
# for the summary: round, mode, build.
record() { echo "$round $1 $2 $(grep Requests/sec "$3" | awk '{print $2}') $(grep " 99%" "$3" | awk '{print $2}')" >> "$work/results"; }
# cpu is the CPU time, in clock ticks, that the processes have used.
cpu() { for p in "$@"; do awk '{print $14+$15}' /proc/$p/stat; done | paste -sd+ | bc; }
# per prints the CPU time a request took, from cpu's figures before and
# after a wrk run and the requests it completed: on a machine shared with
# other work the throughput varies with that work, the CPU a request costs
# much less.
per() { echo "   CPU per request: $(echo "scale=1; ($2-$1)*1000000/$(getconf CLK_TCK)/$3" | bc) µs"; }
local() { # mode binary
  rm -rf "$work/db-$1" && mkdir -p "$work/db-$1"
  # Its log line per request goes to a file, as a deployment's would (to
  # a file or a collector's pipe): not to a terminal, which would measure
  # the terminal, nor to /dev/null, which would leave the lines' cost out.
  env -i PATH="$PATH" ADDR=127.0.0.1:3100 DB_PATH="$work/db-$1/ratelimit.db" JOURNAL_MODE=$1 RATE_LIMIT=1000000000 WINDOW_SECONDS=3600 "$2" > "$work/db-$1/local-api.log" 2>&1 &
  API=$!
  sleep 1
  echo "== local-api $1 ($2)"
  c0=$(cpu $API)
  wrk -t2 -c32 -d$D --latency -s ping.lua http://127.0.0.1:3100 | tee wrk-$1.txt | grep -E "Latency|requests in|Requests/sec|Non-2xx|50%|99%"
  record "$1" "$2" wrk-$1.txt
  sent=$(grep "requests in" wrk-$1.txt | awk '{print $1}')
  per "$c0" "$(cpu $API)" "$sent"
  sleep 1
  kill $API; wait $API 2>/dev/null
  python3 - "$work/db-$1/ratelimit.db" "$sent" "$work/db-$1/local-api.log" <<'PY' | tee -a "$work/exact"
import json,sqlite3,sys
db=sqlite3.connect(sys.argv[1])
c=db.execute("select sum(count) from rate_limit_windows").fetchone()[0]
a=db.execute("select count(*) from api_calls").fetchone()[0]
# Every request is allowed: each is counted once, audited once and logged
# once (the server stopped cleanly, so no line may be missing); a few more
# than wrk reports may have been in flight when it stopped, and those whose
# client had gone by then may be logged as cancelled though their batch
# committed them.
lines=[json.loads(l) for l in open(sys.argv[3])]
n=sum(1 for l in lines if l.get("msg")=="request" and l.get("decision")=="allowed")
other={}
for l in lines:
    if l.get("msg")=="request" and l.get("decision")!="allowed":
        k=(l.get("status"),l.get("decision"),l.get("error"))
        other[k]=other.get(k,0)+1
gone=sum(v for k,v in other.items() if k[1]=="cancelled")
exact=c==a and n <= c <= n+gone and 0 <= c-int(sys.argv[2]) <= 32
print(f"   stored {c}, audit rows {a}, logged allowed {n}, wrk completed {sys.argv[2]}: exact={exact}")
for k,v in other.items(): print(f"   also logged {v}: {k}")
PY
}
# ROUNDS rounds, 2 unless set: one round's ratio moves with whatever else
# the machine does (the same build, an hour apart, 0.73x to 0.96x in
# DELETE), so the summary gives each round's and their median.
for round in $(seq "$ROUNDS"); do
  echo "== envoy ratelimit + redis, round $round"
  c0=$(cpu $ENVOY $REDIS)
  wrk -t2 -c32 -d$D --latency -s envoy.lua http://127.0.0.1:8090 | tee wrk-envoy.txt | grep -E "Latency|requests in|Requests/sec|Non-2xx|50%|99%"
  record envoy envoy wrk-envoy.txt
  per "$c0" "$(cpu $ENVOY $REDIS)" "$(grep "requests in" wrk-envoy.txt | awk '{print $1}')"
  for mode in WAL DELETE; do
    if [ -n "${LOCAL_API_BEFORE:-}" ]; then local $mode "$LOCAL_API_BEFORE"; fi
    local $mode "$LOCAL_API"
  done
done
kill $ENVOY $REDIS; wait 2>/dev/null
echo "== summary: requests a second against envoy's in the same round (p99 in ms, envoy's after the slash)"
python3 - "$work/results" <<'PY'
import statistics,sys
envoy,runs={},{}
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)!=5 or float(f[3])<=0:
        print(f"   round {f[0]}: {' '.join(f[1:3])} gave no figures (wrk failed?): left out")
        continue
    rnd,mode,build,rps,p99=f
    p99={"us":lambda v:v/1000,"ms":lambda v:v}.get(p99[-2:],lambda v:v*1000)(float(p99.rstrip("mus")))
    if mode=="envoy": envoy[rnd]=(float(rps),p99); continue
    runs.setdefault((mode,build),[]).append((rnd,float(rps),p99))
for (mode,build),rs in runs.items():
    rs=[x for x in rs if x[0] in envoy]  # a round whose envoy run failed has no ratio
    if not rs: continue
    ratios=[rps/envoy[r][0] for r,rps,_ in rs]
    each=", ".join(f"{x:.2f}x ({p:.2f}/{envoy[r][1]:.2f})" for x,(r,_,p) in zip(ratios,rs))
    print(f"   {mode} {build}: {each}; median {statistics.median(ratios):.2f}x")
PY
# Exact only if every local run's check ran and said so: a check that
# crashed (no database, a log line that is not JSON) says nothing.
builds=1; [ -n "${LOCAL_API_BEFORE:-}" ] && builds=2
runs=$(( ROUNDS * 2 * builds ))
n=$(grep -c "exact=True" "$work/exact")
[ "$n" = "$runs" ] && echo "   every local run exact ($n of $runs)" || echo "   NOT EXACT: $n local runs of $runs checked exact"
echo "== done"
