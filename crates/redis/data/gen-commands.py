#!/usr/bin/env python3
"""Writes commands-7.0.resp: Redis 7.0's own description of every command
and subcommand, as `COMMAND INFO` and `COMMAND DOCS` answer it, taken from
a running redis-server 7.0 (the table Redis generates from its
src/commands/*.json, so flags, ACL categories, tips, key specs and docs
are Redis's exactly, not retyped).

    python3 crates/redis/data/gen-commands.py [redis-server]

The file is one RESP3 array; each element is an array of three:
the name (lower case, `container|sub` for a subcommand), its COMMAND INFO
entry with the subcommands field emptied, and its COMMAND DOCS map without
the `subcommands` key. nvdepot composes a container's subcommands from the
entries of the subcommands it implements (crates/redis/src/command_table.rs).
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "commands-7.0.resp")
PORT = 7391


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("redis-server closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        text, self.buf = self.buf.split(b"\r\n", 1)
        return text

    def exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n + 2:]
        return body

    def value(self):
        """A typed tree: (tag, payload)."""
        head = self.line()
        tag, text = head[:1], head[1:]
        if tag in (b"+", b"-", b"(", b","):
            return (tag, text)
        if tag == b":":
            return (tag, int(text))
        if tag in (b"$", b"!", b"="):
            n = int(text)
            return (tag, None) if n < 0 else (tag, self.exact(n))
        if tag in (b"*", b"~", b">"):
            n = int(text)
            return (tag, None) if n < 0 else (tag, [self.value() for _ in range(n)])
        if tag == b"%":
            n = int(text)
            return (tag, [(self.value(), self.value()) for _ in range(n)])
        if tag in (b"_", b"#"):
            return (tag, text)
        raise ValueError("unknown RESP3 type %r" % head)


def encode(v):
    tag, p = v
    if tag in (b"+", b"-", b"(", b",", b"_", b"#"):
        return tag + p + b"\r\n"
    if tag == b":":
        return b":%d\r\n" % p
    if tag in (b"$", b"!", b"="):
        return tag + b"-1\r\n" if p is None else tag + b"%d\r\n" % len(p) + p + b"\r\n"
    if tag in (b"*", b"~", b">"):
        if p is None:
            return tag + b"-1\r\n"
        return tag + b"%d\r\n" % len(p) + b"".join(encode(x) for x in p)
    if tag == b"%":
        return b"%%%d\r\n" % len(p) + b"".join(encode(k) + encode(x) for k, x in p)
    raise ValueError(tag)


def command(sock, reader, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return reader.value()


def main():
    server = sys.argv[1] if len(sys.argv) > 1 else "redis-server"
    version = subprocess.run([server, "--version"], capture_output=True, text=True).stdout
    if " v=7.0." not in version:
        sys.exit("needs redis-server 7.0, found: " + version.strip())
    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.Popen(
            [server, "--port", str(PORT), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", work],
            stdout=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                try:
                    sock = socket.create_connection(("127.0.0.1", PORT))
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                sys.exit("redis-server did not start")
            reader = Reader(sock)
            command(sock, reader, "HELLO", "3")
            names = sorted(x[1].decode() for x in command(sock, reader, "COMMAND", "LIST")[1])
            entries = []
            for name in names:
                info = command(sock, reader, "COMMAND", "INFO", name)[1][0]
                fields = list(info[1])
                fields[9] = (b"*", [])
                docs = command(sock, reader, "COMMAND", "DOCS", name)[1]
                assert len(docs) == 1, name
                doc_map = [(k, x) for k, x in docs[0][1][1] if k[1] != b"subcommands"]
                entries.append((b"*", [(b"$", name.encode()), (b"*", fields), (b"%", doc_map)]))
            sock.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        finally:
            proc.wait(timeout=10)
    with open(OUT, "wb") as f:
        f.write(encode((b"*", entries)))
    print("%s: %d commands and subcommands from %s" % (OUT, len(entries), version.split()[2]))


if __name__ == "__main__":
    main()
