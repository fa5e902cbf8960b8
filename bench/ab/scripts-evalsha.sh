#!/bin/bash
# bench/ab/scripts-evalsha.sh -- interleaved A/B of EVALSHA throughput and server CPU per
# script: /tmp/nv-base and /tmp/nv-new (two builds of nvdepot) and redis-server
# (no persistence), fresh stores with 10 000 keys, the 3-call read script and
# the 3-call write script of bench/resp-scripts-pubsub.sh.
# usage: SERVERS="base new redis" CONCS="1 16" REPS=3 bash bench/ab/scripts-evalsha.sh
N=${N:-30000}; REPS=${REPS:-3}; CONCS=${CONCS:-"1 16"}
W=/tmp/abscr; mkdir -p $W
READ='redis.call("GET", KEYS[1]) redis.call("EXISTS", KEYS[1]) return redis.call("TTL", KEYS[1])'
WRITE='redis.call("GET", KEYS[1]) local n = redis.call("INCR", KEYS[1] .. ":n") redis.call("EXPIRE", KEYS[1] .. ":n", 3600) return n'
port=27100
for rep in $(seq 1 $REPS); do
 for s in ${SERVERS:-base new redis}; do
  port=$((port+1)); rm -rf $W/$s; mkdir -p $W/$s
  if [ $s = redis ]; then setsid redis-server --port $port --bind 127.0.0.1 --dir $W/$s --save '' --appendonly no >/dev/null 2>&1 </dev/null &
  else setsid /tmp/nv-$s serve --port $port --data $W/$s/store --size 2G 2>$W/$s.log </dev/null & fi
  pid=$!
  for _ in $(seq 1 300); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p $port -c 8 -n 10000 -r 10000 -t set -q >/dev/null 2>&1
  r=$(redis-cli -p $port script load "$READ"); w=$(redis-cli -p $port script load "$WRITE")
  line="$s rep=$rep"
  for c in $CONCS; do
   t0=$(awk '{print $14+$15}' /proc/$pid/stat)
   rr=$(timeout 120 redis-benchmark -p $port -c $c -n $N -r 10000 --csv EVALSHA $r 1 key:__rand_int__ 2>/dev/null | tr -d '"' | grep -E '^[A-Za-z]' | tail -1 | cut -d, -f2)
   t1=$(awk '{print $14+$15}' /proc/$pid/stat)
   ww=$(timeout 120 redis-benchmark -p $port -c $c -n $N -r 10000 --csv EVALSHA $w 1 key:__rand_int__ 2>/dev/null | tr -d '"' | grep -E '^[A-Za-z]' | tail -1 | cut -d, -f2)
   cpu=$(python3 -c "print(round(($t1-$t0)*10000/$N,1))")
   line="$line c=$c read=$rr (cpu ${cpu}us) write=$ww"
  done
  echo "$line"
  kill $pid; wait $pid 2>/dev/null; rm -rf $W/$s
 done
done
