/* Golden values for crates/server/src/families/geo.rs, computed with Redis 7.0's own
 * geohash.c, geohash_helper.c and pqsort.c, and glibc's qsort:
 *
 *   S=path/to/redis-7.0.15/src
 *   cc -O2 -I$S scripts/geo-golden.c $S/geohash.c $S/geohash_helper.c $S/pqsort.c -lm -o /tmp/geo-golden
 *   /tmp/geo-golden > crates/server/src/families/geo_golden.rs
 *
 * Doubles are written as their bits (f64::from_bits), so nothing is lost in printing. The
 * inputs come from a fixed xorshift generator, plus edge cases: the limits, the poles'
 * neighbourhood, the antimeridian, radii from 0 to the size of the Earth.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geohash.h"
#include "geohash_helper.h"

void pqsort(void *a, size_t n, size_t es, int (*cmp)(const void *, const void *), size_t lrange, size_t rrange);

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* Uniform in [lo, hi). */
static double uni(double lo, double hi) { return lo + (hi - lo) * ((next() >> 11) * (1.0 / 9007199254740992.0)); }

static uint64_t bits(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* geo.c's decodeGeohash and GEOHASH, as there. */
static void decode_score(double score, double *xy) {
    GeoHashBits hash = {.bits = (uint64_t)score, .step = GEO_STEP_MAX};
    geohashDecodeToLongLatWGS84(hash, xy);
}

static void geohash_string(double score, char *buf) {
    const char *alphabet = "0123456789bcdefghjkmnpqrstuvwxyz";
    double xy[2];
    decode_score(score, xy);
    GeoHashRange r[2] = {{.min = -180, .max = 180}, {.min = -90, .max = 90}};
    GeoHashBits hash;
    geohashEncode(&r[0], &r[1], xy[0], xy[1], 26, &hash);
    for (int i = 0; i < 11; i++) {
        int idx = i == 10 ? 0 : (hash.bits >> (52 - ((i + 1) * 5))) & 0x1f;
        buf[i] = alphabet[idx];
    }
    buf[11] = 0;
}

/* util.c's digits10 and fixedpoint_d2string, copied as they are (util.c needs the server). */
static uint32_t digits10(uint64_t v) {
    if (v < 10) return 1;
    if (v < 100) return 2;
    if (v < 1000) return 3;
    if (v < 1000000000000UL) {
        if (v < 100000000UL) {
            if (v < 1000000) {
                if (v < 10000) return 4;
                return 5 + (v >= 100000);
            }
            return 7 + (v >= 10000000UL);
        }
        if (v < 10000000000UL) {
            return 9 + (v >= 1000000000UL);
        }
        return 11 + (v >= 100000000000UL);
    }
    return 12 + digits10(v / 1000000000000UL);
}

static int fixedpoint_d2string(char *dst, size_t dstlen, double dvalue, int fractional_digits) {
    if (fractional_digits < 1 || fractional_digits > 17)
        goto err;
    /* min size of 2 ( due to 0. ) + n fractional_digitits + \0 */
    if ((int)dstlen < (fractional_digits+3))
        goto err;
    if (dvalue == 0) {
        dst[0] = '0';
        dst[1] = '.';
        memset(dst + 2, '0', fractional_digits);
        dst[fractional_digits+2] = '\0';
        return fractional_digits + 2;
    }
    /* scale and round */
    static double powers_of_ten[] = {1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0,
    10000000.0, 100000000.0, 1000000000.0, 10000000000.0, 100000000000.0, 1000000000000.0,
    10000000000000.0, 100000000000000.0, 1000000000000000.0, 10000000000000000.0,
    100000000000000000.0 };
    long long svalue = llrint(dvalue * powers_of_ten[fractional_digits]);
    unsigned long long value;
    /* write sign */
    int negative = 0;
    if (svalue < 0) {
        if (svalue != LLONG_MIN) {
            value = -svalue;
        } else {
            value = ((unsigned long long) LLONG_MAX)+1;
        }
        if (dstlen < 2)
            goto err;
        negative = 1;
        dst[0] = '-';
        dst++;
        dstlen--;
    } else {
        value = svalue;
    }

    static const char digitsd[201] =
        "0001020304050607080910111213141516171819"
        "2021222324252627282930313233343536373839"
        "4041424344454647484950515253545556575859"
        "6061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";

    /* Check length. */
    uint32_t ndigits = digits10(value);
    if (ndigits >= dstlen) goto err;
    int integer_digits = ndigits - fractional_digits;
    /* Fractional only check to avoid representing 0.7750 as .7750.
     * This means we need to increment the length and store 0 as the first character.
     */
    if (integer_digits < 1) {
        dst[0] = '0';
        integer_digits = 1;
    }
    dst[integer_digits] = '.';
    int size = integer_digits + 1 + fractional_digits;
    /* fill with 0 from fractional digits until size */
    memset(dst + integer_digits + 1, '0', fractional_digits);
    int next = size - 1;
    while (value >= 100) {
        int const i = (value % 100) * 2;
        value /= 100;
        dst[next] = digitsd[i + 1];
        dst[next - 1] = digitsd[i];
        next -= 2;
        /* dot position */
        if (next == integer_digits) {
            next--;
        }
    }

    /* Handle last 1-2 digits. */
    if (value < 10) {
        dst[next] = '0' + (uint32_t) value;
    } else {
        int i = (uint32_t) value * 2;
        dst[next] = digitsd[i + 1];
        dst[next - 1] = digitsd[i];
    }
    /* Null term. */
    dst[size] = '\0';
    return size + negative;
err:
    /* force add Null termination */
    if (dstlen > 0)
        dst[0] = '\0';
    return 0;
}

static void fixed4(double d, char *out) { fixedpoint_d2string(out, 128, d, 4); }

/* util.c's ld2string in LD_STR_HUMAN mode (addReplyHumanLongDouble). */
static void human(double d, char *buf) {
    int l = snprintf(buf, 64, "%.17Lf", (long double)d);
    if (strchr(buf, '.')) {
        char *p = buf + l - 1;
        while (*p == '0') p--, l--;
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') buf[0] = '0', l = 1;
    buf[l] = 0;
}

static void point(double lon, double lat) {
    GeoHashBits h;
    geohashEncodeWGS84(lon, lat, GEO_STEP_MAX, &h);
    uint64_t score = geohashAlign52Bits(h);
    double xy[2];
    char gh[12], hx[64], hy[64];
    decode_score((double)score, xy);
    geohash_string((double)score, gh);
    human(xy[0], hx);
    human(xy[1], hy);
    printf("    (0x%016lx, 0x%016lx, %lu, 0x%016lx, 0x%016lx, \"%s\", \"%s\", \"%s\"),\n", bits(lon), bits(lat), score,
           bits(xy[0]), bits(xy[1]), gh, hx, hy);
}

/* Any score, as a sorted set may hold: its decoded point and geohash. */
static void score_case(double score) {
    double xy[2];
    char gh[12];
    decode_score(score, xy);
    geohash_string(score, gh);
    printf("    (0x%016lx, 0x%016lx, 0x%016lx, \"%s\"),\n", bits(score), bits(xy[0]), bits(xy[1]), gh);
}

static void hb(GeoHashBits h) { printf("(%lu, %u), ", h.bits, h.step); }

static void shape_case(int type, double lon, double lat, double a, double b, double conversion) {
    GeoShape s = {0};
    s.type = type;
    s.xy[0] = lon;
    s.xy[1] = lat;
    s.conversion = conversion;
    if (type == CIRCULAR_TYPE) {
        s.t.radius = a;
    } else {
        s.t.r.width = a;
        s.t.r.height = b;
    }
    GeoHashRadius r = geohashCalculateAreasByShapeWGS84(&s);
    printf("    (%d, 0x%016lx, 0x%016lx, 0x%016lx, 0x%016lx, 0x%016lx, [", type, bits(lon), bits(lat), bits(a), bits(b),
           bits(conversion));
    for (int i = 0; i < 4; i++) printf("0x%016lx, ", bits(s.bounds[i]));
    printf("], ");
    hb(r.hash);
    printf("[");
    GeoHashNeighbors n = r.neighbors;
    GeoHashBits all[8] = {n.north, n.east, n.west, n.south, n.north_east, n.south_east, n.north_west, n.south_west};
    for (int i = 0; i < 8; i++) hb(all[i]);
    printf("]),\n");
}

static void dist_case(double lon1, double lat1, double lon2, double lat2) {
    double d = geohashGetDistance(lon1, lat1, lon2, lat2);
    char f[128];
    fixed4(d / 1000, f);
    printf("    (0x%016lx, 0x%016lx, 0x%016lx, 0x%016lx, 0x%016lx, \"%s\"),\n", bits(lon1), bits(lat1), bits(lon2),
           bits(lat2), bits(d), f);
}

typedef struct {
    double longitude, latitude, dist, score;
    char *member;
} geoPoint; /* geo.h's: 40 bytes, so glibc sorts pointers to it */

static int asc(const void *a, const void *b) {
    const geoPoint *x = a, *y = b;
    if (x->dist > y->dist) return 1;
    if (x->dist == y->dist) return 0;
    return -1;
}
static int desc(const void *a, const void *b) { return -asc(a, b); }

static void sort_case(int n, int k, int descending) {
    geoPoint *p = calloc(n, sizeof *p);
    double values[] = {1, 2, 3, 4, NAN};
    int nan = next() % 4 == 0;
    printf("    (%d, %d, &[", k, descending);
    for (int i = 0; i < n; i++) {
        p[i].dist = values[next() % (nan ? 5 : 4)];
        p[i].score = i;
        printf("%s, ", isnan(p[i].dist) ? "f64::NAN" : (p[i].dist == 1 ? "1.0" : p[i].dist == 2 ? "2.0" : p[i].dist == 3 ? "3.0" : "4.0"));
    }
    if (k == n)
        qsort(p, n, sizeof *p, descending ? desc : asc);
    else
        pqsort(p, n, sizeof *p, descending ? desc : asc, 0, k - 1);
    printf("], &[");
    for (int i = 0; i < n; i++) printf("%d, ", (int)p[i].score);
    printf("]),\n");
    free(p);
}

int main(void) {
    printf("// Generated by scripts/geo-golden.c from Redis 7.0.15's geohash code; do not edit by hand.\n");
    printf("// Points: lon, lat, score, decoded lon, decoded lat, GEOHASH, GEOPOS text.\n");
    printf("pub const POINTS: &[(u64, u64, u64, u64, u64, &str, &str, &str)] = &[\n");
    double edge[][2] = {{0, 0}, {-180, -85.05112878}, {180, 85.05112878}, {-180, 85.05112878}, {180, -85.05112878},
                        {13.361389, 38.115556}, {15.087269, 37.502669}, {-73.9454966, 40.747533}, {-5.6, 42.6},
                        {-0.15307903289794921875, 85}, {179.99999, 0.00001}, {-179.99999, -0.00001}, {1e-300, -1e-300}};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) point(edge[i][0], edge[i][1]);
    for (int i = 0; i < 60; i++) point(uni(-180, 180), uni(-85.05112878, 85.05112878));
    printf("];\n\n// Scores: score, decoded lon, decoded lat, GEOHASH.\n");
    printf("pub const SCORES: &[(u64, u64, u64, &str)] = &[\n");
    double scores[] = {0, -0.0, 1, -1, 0.5, 1e300, -1e300, INFINITY, -INFINITY, 1e19, -1e19, 9.3e18, 9223372036854775808.0,
                       -9223372036854775808.0, 4503599627370495, 4503599627370496, 4503599627370497, 18446744073709551615.0,
                       3479099956230698, 1e-320};
    for (size_t i = 0; i < sizeof scores / sizeof *scores; i++) score_case(scores[i]);
    for (int i = 0; i < 20; i++) score_case(floor(uni(0, 4503599627370496.0)));
    printf("];\n\n// Shapes: type (1 radius, 2 box), lon, lat, radius or width, height, meters per unit, bounds,\n");
    printf("// centre cell, neighbours (north east west south north_east south_east north_west south_west).\n");
    printf("pub const SHAPES: &[(u8, u64, u64, u64, u64, u64, [u64; 4], (u64, u8), [(u64, u8); 8])] = &[\n");
    shape_case(1, 0, 0, 0, 0, 1);
    shape_case(1, 0, 0, 1, 0, 1000);
    shape_case(1, -73.9798091, 40.7598464, 3, 0, 1000);
    shape_case(2, -73.9798091, 40.7598464, 6, 6, 1000);
    shape_case(1, 0, 0, 50000, 0, 1000);
    shape_case(1, 45, 65, 5009431, 0, 1);
    shape_case(1, -0.15307903289794921875, 85, 4891.94, 0, 1);
    shape_case(2, 179, 37, 400, 400, 1000);
    shape_case(2, -179, 37, 400, 400, 1000);
    shape_case(2, 15, 37, 400, 2, 1000);
    shape_case(1, 15, -37, 200, 0, 1609.34);
    shape_case(2, 15, -80.5, 20, 30, 0.3048);
    shape_case(1, 180, 85.05112878, 1, 0, 1);
    shape_case(1, -180, -85.05112878, 1e9, 0, 1);
    for (int i = 0; i < 40; i++) {
        int box = next() % 2;
        double lon = uni(-180, 180), lat = uni(-85.05112878, 85.05112878);
        double scale = pow(10, (double)(next() % 8)); /* 1 m .. 10000 km */
        double conv[] = {1, 1000, 0.3048, 1609.34};
        shape_case(box ? 2 : 1, lon, lat, uni(0, 1) * scale, uni(0, 1) * scale, conv[next() % 4]);
    }
    printf("];\n\n// Distances: lon1, lat1, lon2, lat2, meters, GEODIST in km.\n");
    printf("pub const DISTANCES: &[(u64, u64, u64, u64, u64, &str)] = &[\n");
    dist_case(13.361389, 38.115556, 15.087269, 37.502669);
    dist_case(0, 0, 0, 0);
    dist_case(0, 10, 0, -10);
    dist_case(0, 0, 180, 0);
    dist_case(-180, 0, 180, 0);
    dist_case(10, 85, -170, -85);
    dist_case(0, 0.00000001, 0.00000001, 0);
    for (int i = 0; i < 40; i++) dist_case(uni(-180, 180), uni(-85, 85), uni(-180, 180), uni(-85, 85));
    printf("];\n\n// Sorts: k (the first k by pqsort; all: qsort), descending, distances, order after.\n");
    printf("pub const SORTS: &[(usize, u8, &[f64], &[u32])] = &[\n");
    for (int i = 0; i < 40; i++) {
        int n = 1 + next() % 70;
        int k = next() % 3 == 0 ? n : 1 + next() % n;
        sort_case(n, k, next() % 2);
    }
    printf("];\n");
    return 0;
}
