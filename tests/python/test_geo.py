"""Geo commands through redis-py, in RESP2 and RESP3 (Redis 7.0 behaviour; the values are the
examples of Redis's command documentation)."""

import pytest
from redis.exceptions import ResponseError

SICILY = (13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania")


def test_geoadd_pos_dist_hash(r, k):
    g = k("Sicily")
    assert r.geoadd(g, SICILY) == 2
    assert r.geoadd(g, SICILY) == 0
    assert r.geodist(g, "Palermo", "Catania") == 166274.1516
    assert r.geodist(g, "Palermo", "Catania", unit="km") == 166.2742
    assert r.geodist(g, "Palermo", "Catania", unit="mi") == 103.3182
    assert r.geodist(g, "Foo", "Bar") is None
    assert r.geohash(g, "Palermo", "Catania", "NonExisting") == ["sqc8b49rny0", "sqdtr74hyu0", None]
    pos = r.geopos(g, "Palermo", "Catania", "NonExisting")
    assert pos[0] == pytest.approx((13.361389338970184, 38.1155563954963))
    assert pos[1] == pytest.approx((15.087267458438873, 37.50266842333162))
    assert pos[2] is None
    # A geo set is a sorted set scored by the 52-bit geohash.
    assert r.zscore(g, "Palermo") == 3479099956230698
    assert r.type(g) == "zset"
    with pytest.raises(ResponseError, match="invalid longitude,latitude pair 200.000000,100.000000"):
        r.geoadd(g, (200, 100, "x"))


def test_geoadd_nx_xx_ch(r, k):
    g = k("g")
    assert r.geoadd(g, (1, 1, "a")) == 1
    assert r.geoadd(g, (2, 2, "a", 3, 3, "b"), nx=True) == 1
    assert r.geopos(g, "a")[0] == pytest.approx((1, 1), abs=1e-5)
    assert r.geoadd(g, (4, 4, "a", 5, 5, "c"), xx=True, ch=True) == 1
    assert r.geopos(g, "a")[0] == pytest.approx((4, 4), abs=1e-5)
    assert r.zcard(g) == 2
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("GEOADD", g, "NX", "XX", 1, 1, "a")


def test_georadius_and_bymember(r, k):
    g = k("Sicily")
    r.geoadd(g, SICILY)
    assert r.georadius(g, 15, 37, 200, unit="km", withdist=True) == [["Palermo", 190.4424], ["Catania", 56.4413]]
    got = r.georadius(g, 15, 37, 200, unit="km", withcoord=True)
    assert [m for m, _ in got] == ["Palermo", "Catania"]
    assert got[0][1] == pytest.approx((13.36138933897018433, 38.11555639549629859))
    assert r.georadius(g, 15, 37, 200, unit="km", withdist=True, withcoord=True, sort="ASC", count=1)[0][:2] == [
        "Catania",
        56.4413,
    ]
    assert r.georadius(g, 15, 37, 200, unit="km", withhash=True, sort="DESC") == [
        ["Palermo", 3479099956230698],
        ["Catania", 3479447370796909],
    ]
    r.geoadd(g, (13.583333, 37.316667, "Agrigento"))
    assert r.georadiusbymember(g, "Agrigento", 100, unit="km") == ["Agrigento", "Palermo"]
    assert r.georadius(k("nokey"), 15, 37, 200, unit="km") == []
    with pytest.raises(ResponseError, match="could not decode requested zset member"):
        r.georadiusbymember(g, "nope", 100, unit="km")
    with pytest.raises(ResponseError, match="unsupported unit"):
        r.execute_command("GEORADIUS", g, 15, 37, 200, "yd")


def test_geosearch_and_store(r, k):
    g, dst = k("Sicily"), k("dst")
    r.geoadd(g, SICILY)
    r.geoadd(g, (12.758489, 38.788135, "edge1", 17.241510, 38.788135, "edge2"))
    assert r.geosearch(g, longitude=15, latitude=37, radius=200, unit="km", sort="ASC") == ["Catania", "Palermo"]
    got = r.geosearch(g, longitude=15, latitude=37, width=400, height=400, unit="km", sort="ASC", withdist=True)
    assert got == [["Catania", 56.4413], ["Palermo", 190.4424], ["edge2", 279.7403], ["edge1", 279.7405]]
    assert r.geosearch(g, member="Palermo", radius=100, unit="km") == ["Palermo", "edge1"]
    assert r.geosearch(g, member="Palermo", radius=500, unit="km", count=2, any=True, sort="DESC") != []
    assert r.geosearchstore(dst, g, longitude=15, latitude=37, radius=200, unit="km") == 2
    assert r.zrange(dst, 0, -1) == ["Palermo", "Catania"]  # by geohash
    assert r.geosearchstore(dst, g, longitude=15, latitude=37, radius=200, unit="km", storedist=True) == 2
    assert r.zscore(dst, "Catania") == pytest.approx(56.4413, abs=1e-4)
    assert r.execute_command("GEORADIUS", g, 15, 37, 200, "km", "STORE", dst) == 2
    assert r.zscore(dst, "Palermo") == 3479099956230698
    with pytest.raises(ResponseError, match="exactly one of BYRADIUS and BYBOX"):
        r.execute_command("GEOSEARCH", g, "FROMLONLAT", 15, 37, "ASC", "WITHDIST")
    with pytest.raises(ResponseError, match="not compatible with WITHDIST"):
        r.execute_command("GEOSEARCHSTORE", dst, g, "FROMLONLAT", 15, 37, "BYRADIUS", 1, "km", "WITHDIST")
    r.set(k("str"), "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.geosearch(k("str"), longitude=15, latitude=37, radius=200, unit="km")
