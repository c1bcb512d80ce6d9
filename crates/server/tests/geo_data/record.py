"""Records the requests below against a redis-server 7.0.15 and writes cases.rs beside this file:
each request with Redis's reply, in RESP2 and (after HELLO 3) RESP3.

    redis-server --port 24110 --save '' --appendonly no &
    python3 crates/server/tests/geo_data/record.py 24110

A request is its arguments joined by single spaces (no argument holds a space); arguments may
hold other bytes (a NUL, to check that option words are read as C strings).
"""

import os
import random
import socket
import sys


def command(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode("latin-1")
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in b"+-:_,#(":
        return line
    n = int(rest)
    if kind in b"$!=":
        return line if n < 0 else line + f.read(n + 2)
    if n < 0:
        return line
    out = line
    for _ in range(n * 2 if kind in b"%|" else n):
        out += read_reply(f)
    return out


def points(seed, n, lon=(-180, 180), lat=(-85, 85)):
    r = random.Random(seed)
    out = []
    for i in range(n):
        out += ["%.6f" % r.uniform(*lon), "%.6f" % r.uniform(*lat), "p%d" % i]
    return out


SICILY = "13.361389 38.115556 Palermo 15.087269 37.502669 Catania"
NYC = ("-73.9733487 40.7648057 central-park -73.9903085 40.7362513 union-square -74.0131604 40.7126674 wtc-one "
       "-73.7858139 40.6428986 jfk -73.9375699 40.7498929 q4 -73.9564142 40.7480973 4545 -73.9454966 40.747533 lic")

# Queries run on both a small (listpack in Redis) and a large (skiplist) set.
QUERIES = [
    "GEORADIUS {k} 0 0 500 km",
    "GEORADIUS {k} 0 0 500 km ASC",
    "GEORADIUS {k} 0 0 2000 km DESC WITHDIST",
    "GEORADIUS {k} 10 10 3000 km WITHDIST WITHHASH WITHCOORD ASC",
    "GEORADIUS {k} 10 10 3000 km COUNT 3",
    "GEORADIUS {k} 10 10 3000 km COUNT 3 DESC WITHDIST",
    "GEORADIUS {k} 10 10 3000 km COUNT 2 ANY",
    "GEORADIUS {k} 10 10 3000 km COUNT 2 ANY DESC",
    "GEORADIUS {k} -170 60 5000 mi ASC",
    "GEORADIUS {k} 179 -5 1500000 m WITHCOORD",
    "GEORADIUS {k} 0 0 30000 km COUNT 5",
    "GEORADIUS_RO {k} 0 0 30000 km COUNT 7 DESC WITHHASH",
    "GEORADIUS {k} 0 0 30000000 ft COUNT 100000 ASC",
    "GEORADIUSBYMEMBER {k} p1 2000 km WITHDIST",
    "GEORADIUSBYMEMBER_RO {k} p2 4000 km COUNT 4",
    "GEOSEARCH {k} FROMLONLAT 0 0 BYBOX 4000 3000 km ASC WITHDIST",
    "GEOSEARCH {k} FROMLONLAT 100 70 BYBOX 9000 2000 km DESC",
    "GEOSEARCH {k} FROMLONLAT -179.5 -80 BYBOX 3000 3000 km",
    "GEOSEARCH {k} FROMMEMBER p3 BYRADIUS 3000 km COUNT 3 WITHCOORD",
    "GEOSEARCH {k} FROMMEMBER p3 BYBOX 6000 6000 km COUNT 3 ANY ASC",
    "GEOSEARCHSTORE dst {k} FROMLONLAT 0 0 BYRADIUS 5000 km",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst {k} FROMLONLAT 0 0 BYRADIUS 5000 km STOREDIST COUNT 4",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEORADIUS {k} 0 0 9000 km STOREDIST dst DESC COUNT 3",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOHASH {k} p0 p1 p2 nope",
    "GEOPOS {k} p0 nope p5",
    "GEODIST {k} p0 p1",
    "GEODIST {k} p0 p1 mi",
]

REQUESTS = [
    "FLUSHALL",
    # GEOADD and its options
    "GEOADD s " + SICILY,
    "GEOADD s " + SICILY,
    "ZRANGE s 0 -1 WITHSCORES",
    "GEOADD s CH 13.361389 38.115556 Palermo 15 37 Catania 1 1 new",
    "GEOADD s NX 2 2 new 3 3 newer",
    "GEOADD s XX CH 4 4 new 5 5 nobody",
    "GEOADD s xx nx 1 1 a",
    "GEOADD s ch ch ch",
    "GEOADD s nx ch ch",
    "GEOADD s GT 1 1 a",
    "GEOADD s 1 1 a 2",
    "GEOADD s 1 1 a 200 1 b",
    "GEOADD s 1 1 a 1 86 b",
    "GEOADD s 180 85.05112878 top -180 -85.05112878 bottom",
    "GEOADD s 180.0000001 0 x",
    "GEOADD s inf 0 x",
    "GEOADD s nan 0 x",
    "GEOADD s 0x10 0x1p3 hex",
    "GEOADD s 1e400 0 x",
    "GEOADD s 1x 0 x",
    "GEOADD s +1 0 x",
    "GEOADD s -0 -0 zero",
    "GEOPOS s top bottom zero hex new",
    "GEOHASH s top bottom zero hex Palermo",
    "ZSCORE s top",
    "GEOADD s CH\x00junk 1 1 nul",
    "GEOADD s 1 1",
    # GEODIST
    "GEODIST s Palermo Catania",
    "GEODIST s Palermo Catania km",
    "GEODIST s Palermo Catania KM",
    "GEODIST s Palermo Catania ft",
    "GEODIST s Palermo Catania mi",
    "GEODIST s Palermo Palermo",
    "GEODIST s Palermo nope",
    "GEODIST s Palermo Catania yards",
    "GEODIST s Palermo Catania km extra",
    "GEODIST nokey a b",
    "GEODIST nokey a b yards",
    "GEODIST s top bottom",
    # GEOHASH / GEOPOS
    "GEOHASH s",
    "GEOHASH nokey a b",
    "GEOPOS nokey a b",
    "GEOPOS s",
    # odd scores written by ZADD
    "ZADD odd -1 a 1e300 b inf c -inf d 1e19 e -1e19 f 0 g 4503599627370496 h 4503599627370495 i 0.5 j",
    "GEOPOS odd a b c d e f g h i j",
    "GEOHASH odd a b c d e f g h i j",
    "GEODIST odd a i",
    "GEORADIUS odd 0 0 50000 km WITHHASH WITHCOORD",
    # wrong types
    "SET str x",
    "GEOADD str 1 1 a",
    "GEOADD str 1 100 a",
    "GEODIST str a b",
    "GEODIST str a b yards",
    "GEOHASH str a",
    "GEOPOS str a",
    "GEORADIUS str 0 0 1 km",
    "GEORADIUS str 0 200 1 km",
    "GEORADIUSBYMEMBER str a 1 km",
    "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEOSEARCHSTORE d str FROMLONLAT 0 0 BYRADIUS 1 km",
    # argument errors, in Redis's order
    "GEORADIUS s abc 0 1 km",
    "GEORADIUS s 0 abc 1 km",
    "GEORADIUS s 0 100 1 km",
    "GEORADIUS s 0 0 abc km",
    "GEORADIUS s 0 0 -1 km",
    "GEORADIUS s 0 0 1 yd",
    "GEORADIUS s 0 0 1 km\x00x",
    "GEORADIUS s 0 0 1 km BOGUS",
    "GEORADIUS s 0 0 1 km COUNT",
    "GEORADIUS s 0 0 1 km COUNT 0",
    "GEORADIUS s 0 0 1 km COUNT -1",
    "GEORADIUS s 0 0 1 km COUNT abc",
    "GEORADIUS s 0 0 1 km COUNT 1.5",
    "GEORADIUS s 0 0 1 km ANY",
    "GEORADIUS s 0 0 1 km ANY COUNT 0",
    "GEORADIUS s 0 0 1 km STORE",
    "GEORADIUS s 0 0 1 km STORE d WITHDIST",
    "GEORADIUS s 0 0 1 km WITHHASH STOREDIST d",
    "GEORADIUS s 0 0 1 km WITHCOORDS",
    "GEORADIUS s 0 0 1 km FROMLONLAT 0 0",
    "GEORADIUS_RO s 0 0 1 km STORE d",
    "GEORADIUS_RO s 0 0 1 km STOREDIST d",
    "GEORADIUSBYMEMBER s nope 1 km",
    "GEORADIUSBYMEMBER s nope abc km",
    "GEORADIUSBYMEMBER s Palermo abc km",
    "GEORADIUSBYMEMBER s Palermo 1 yd",
    "GEORADIUSBYMEMBER s Palermo 1 km BOGUS",
    "GEORADIUSBYMEMBER_RO s Palermo 1 km STORE d",
    "GEOSEARCH s BYRADIUS 1 km FROMLONLAT 0 0 BOGUS",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km STORE d",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km STOREDIST",
    "GEOSEARCH s FROMLONLAT 0 0 FROMMEMBER Palermo BYRADIUS 1 km",
    "GEOSEARCH s FROMMEMBER Palermo FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEOSEARCH s FROMMEMBER nope BYRADIUS 1 km",
    "GEOSEARCH s FROMMEMBER nope BYRADIUS abc km",
    "GEOSEARCH s BYRADIUS abc km FROMMEMBER nope",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km BYBOX 1 1 km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX 1 1 km BYRADIUS 1 km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX abc 1 km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX 1 abc km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX -1 1 km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX 1 -1 km",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX 1 1 yd",
    "GEOSEARCH s FROMLONLAT 0 0 BYBOX 1 1",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1",
    "GEOSEARCH s FROMLONLAT 0 BYRADIUS 1 km",
    "GEOSEARCH s FROMLONLAT 0 0 ASC DESC WITHHASH",
    "GeoSearch s BYRADIUS 1 km ASC DESC WITHHASH",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km ANY",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km COUNT 0",
    "GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km WITHDIST",
    "GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km STORE x",
    "GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km",
    "geosearchstore d s BYRADIUS 1 km FROMLONLAT 0 0 STOREDIST STOREDIST",
    # a missing source: the options are still checked; STORE deletes the destination
    "GEORADIUS nokey 0 0 1 km",
    "GEORADIUS nokey 0 0 1 km BOGUS",
    "GEORADIUS nokey 0 0 1 km ANY",
    "GEORADIUSBYMEMBER nokey nope abc yd",
    "GEORADIUSBYMEMBER nokey nope abc yd BOGUS",
    "GEOSEARCH nokey FROMMEMBER nope BYRADIUS 1 km",
    "GEOSEARCH nokey FROMMEMBER nope BYRADIUS abc km",
    "GEOSEARCH nokey FROMMEMBER nope",
    "SET d x",
    "GEORADIUS nokey 0 0 1 km STORE d",
    "EXISTS d",
    "SET d x",
    "GEOSEARCHSTORE d nokey FROMMEMBER nope BYBOX 1 1 km",
    "EXISTS d",
    "GEORADIUSBYMEMBER nokey nope 1 km STORE d",
    # searches that find nothing; STORE of nothing deletes the destination
    "GEORADIUS s -100 -50 1 km",
    "GEORADIUS s -100 -50 1 km WITHDIST",
    "SET d x",
    "EXPIRE d 100",
    "GEORADIUS s -100 -50 1 km STORE d",
    "EXISTS d",
    # STORE replaces any value, and its TTL
    "SET d x",
    "EXPIRE d 100",
    "GEORADIUS s 15 37 200 km STORE d",
    "TYPE d",
    "TTL d",
    "ZRANGE d 0 -1 WITHSCORES",
    "GEORADIUS s 15 37 200 km STOREDIST d STORE e",
    "ZRANGE e 0 -1 WITHSCORES",
    "GEORADIUS s 15 37 200 km STORE d STOREDIST e",
    "ZRANGE e 0 -1 WITHSCORES",
    "GEORADIUSBYMEMBER s Palermo 300 km STOREDIST s",
    "ZRANGE s 0 -1 WITHSCORES",
    # the unit's examples, and ties in distance
    "GEOADD nyc " + NYC,
    "GEORADIUS nyc -73.9798091 40.7598464 3 km asc",
    "GEORADIUS nyc -73.9798091 40.7598464 3 km withdist asc",
    "GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3 ANY",
    "GEOSEARCH nyc fromlonlat -73.9798091 40.7598464 bybox 6 6 km withdist asc",
    "GEORADIUSBYMEMBER nyc wtc-one 7 km withdist",
    "GEOADD ties 1 1 a 1 1 b 1 1 c -1 -1 d -1 -1 e 0 0 f 1 -1 g -1 1 h",
    "GEORADIUS ties 0 0 500 km ASC",
    "GEORADIUS ties 0 0 500 km DESC",
    "GEORADIUS ties 0 0 500 km COUNT 3",
    "GEORADIUS ties 0 0 500 km COUNT 3 DESC",
    "GEORADIUS ties 0 0 500 km COUNT 5 WITHDIST",
    "GEOSEARCH ties FROMMEMBER a BYRADIUS 0 m WITHDIST",
    "GEOSEARCH ties FROMMEMBER a BYBOX 0 0 m",
    # huge and infinite radii, the poles and the antimeridian
    "GEOADD far 179.9 0 e -179.9 0 w 0 85 n 0 -85 s 0 0 o 180 0 e2",
    "GEORADIUS far 0 0 inf km ASC",
    "GEORADIUS far 0 0 20015 km DESC WITHDIST",
    "GEORADIUS far 180 0 100 km WITHDIST",
    "GEOSEARCH far FROMLONLAT -180 0 BYBOX 100 100 km WITHDIST ASC",
    "GEOSEARCH far FROMLONLAT 0 85.05112878 BYRADIUS 100 km",
    "GEOSEARCH far FROMLONLAT 0 0 BYBOX inf inf m",
    "GEODIST far e w",
    "GEODIST far o e2 km",
    # option words are C strings
    "GEORADIUS nyc -73.9798091 40.7598464 3 km\x00x ASC\x00y WITHDIST\x00",
    "GEOSEARCH nyc FROMLONLAT\x00 -73.9798091 40.7598464 BYRADIUS 3 km",
]

# A set of 40 points (listpack in Redis) and one of 400 (skiplist).
REQUESTS += ["GEOADD small " + " ".join(points(1, 40))]
REQUESTS += [q.format(k="small") for q in QUERIES]
REQUESTS += ["GEOADD large " + " ".join(points(2, 400))]
REQUESTS += [q.format(k="large") for q in QUERIES]
REQUESTS += ["OBJECT ENCODING small", "OBJECT ENCODING large"]
REQUESTS += [
    "COMMAND GETKEYS GEORADIUS k 0 0 1 km STORE a STOREDIST b",
    "COMMAND GETKEYS GEORADIUS k 0 0 1 km STOREDIST b STORE a",
    "COMMAND GETKEYS GEORADIUS k 0 0 1 km STORE",
    "COMMAND GETKEYS GEORADIUSBYMEMBER k m 1 km store a",
    "COMMAND GETKEYS GEORADIUS_RO k 0 0 1 km",
    "COMMAND GETKEYS GEOSEARCHSTORE d k FROMLONLAT 0 0 BYRADIUS 1 km",
    "COMMAND GETKEYS GEOSEARCH k FROMLONLAT 0 0 BYRADIUS 1 km",
    "COMMAND GETKEYS GEOADD k 1 1 m",
    "COMMAND GETKEYS GEODIST k a b",
]


def rust_str(s):
    out = []
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("\\u{%x}" % ord(ch))
    return '"' + "".join(out) + '"'


def rust_bytes(b):
    out = []
    for c in b:
        if c == 0x22 or c == 0x5C:
            out.append("\\" + chr(c))
        elif c == 13:
            out.append("\\r")
        elif c == 10:
            out.append("\\n")
        elif 32 <= c < 127:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return 'b"' + "".join(out) + '"'


def record(port, resp3):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    if resp3:
        s.sendall(command(["HELLO", "3"]))
        read_reply(f)
    out = []
    for line in REQUESTS:
        s.sendall(command(line.split(" ")))
        out.append((line, read_reply(f)))
    s.close()
    return out


def main():
    port = int(sys.argv[1])
    parts = ["// Generated by record.py from redis-server 7.0.15 replies; do not edit by hand.\n"]
    for name, resp3 in (("RESP2", False), ("RESP3", True)):
        parts.append("pub const %s: &[(&str, &[u8])] = &[\n" % name)
        for line, reply in record(port, resp3):
            parts.append("    (%s, %s),\n" % (rust_str(line), rust_bytes(reply)))
        parts.append("];\n")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.rs"), "w") as f:
        f.write("".join(parts))


main()
