#!/bin/bash
# kill -9 of `nvdepot memcache` 0.5 s after it starts on a fresh 1 GiB store
# (while the store is being created; 512 MiB take ~0.3 s here) under a set
# load that connects as soon as it can, then an immediate restart that must
# serve: issue 35's check (27 of 30 restarts failed before stores were
# created under a temporary name). Usage: bash scripts/kill-at-start.sh
BIN=${NVDEPOT_BIN:-target/debug/nvdepot}
root=${TMPDIR_STORES:-target/kill-at-start}
ok=0
cd "$(dirname "$0")/.."
for i in $(seq 1 30); do
  d=$root/$i; rm -rf $d; mkdir -p $d
  port=$((20000+i))
  $BIN memcache -p $port --data $d --size 1G >/dev/null 2>&1 & pid=$!
  python3 -c "
import socket,time
t=time.time()
while time.time()-t<0.6:
    try:
        s=socket.create_connection(('127.0.0.1',$port),timeout=0.2); break
    except Exception: time.sleep(0.01)
else: raise SystemExit
n=0
while time.time()-t<0.6:
    s.sendall(b'set k%d 0 0 1\r\nx\r\n'%n); n+=1
" >/dev/null 2>&1 &
  sleep 0.5; kill -9 $pid; wait $pid 2>/dev/null
  $BIN memcache -p $port --data $d --size 1G > $d.log 2>&1 & pid=$!
  for t in $(seq 1 300); do grep -q "listening on" $d.log && break; sleep 0.1; done
  r=$(python3 -c "
import socket
s=socket.create_connection(('127.0.0.1',$port),timeout=10); s.sendall(b'set z 0 0 1\r\ny\r\nget z\r\n'); out=b''
while not out.endswith(b'END\r\n'):
    d=s.recv(4096)
    if not d: break
    out+=d
print(out.decode().replace('\r\n',' '), end='')
" 2>/dev/null)
  if [ "$r" = "STORED VALUE z 0 1 y END " ]; then ok=$((ok+1)); else echo "iteration $i: '$r'"; tail -2 $d.log; fi
  kill $pid; wait $pid 2>/dev/null; rm -rf $d $d.log
done
echo "$ok of 30 restarts served"
[ "$ok" -eq 30 ]
