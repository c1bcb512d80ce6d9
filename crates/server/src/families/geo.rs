//! Geospatial commands, as Redis 7.0's `geo.c`, `geohash.c` and `geohash_helper.c`: GEOADD
//! GEODIST GEOHASH GEOPOS GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO
//! GEOSEARCH GEOSEARCHSTORE.
//!
//! A geo set is a sorted set whose scores are 52-bit geohashes, exactly as in Redis, so
//! GEOADD's members are ZRANGE's and ZADD's are GEOPOS's:
//!
//! ```text
//!   longitude  [-180, 180]                 cut into 2^26 steps  -> 26 bits lon
//!   latitude   [-85.05112878, 85.05112878] cut into 2^26 steps  -> 26 bits lat
//!   score = bits interleaved, latitude in the even positions:   lon25 lat25 ... lon0 lat0
//! ```
//!
//! A point decodes to the centre of its cell. A search picks a precision (a `step`, bits per
//! coordinate) from the radius or the box's half-diagonal, so that the cell holding the
//! centre and its 8 neighbours cover the whole area; each of the 9 cells is one score range
//! `[cell << (52 - 2 step), (cell + 1) << (52 - 2 step))` of the sorted set, read with one
//! seek and one walk, and every member found is checked against the exact shape (haversine
//! distance on a sphere of radius 6372797.560856 m).
//!
//! Every floating-point expression is the C code's, operation for operation, and the
//! trigonometry is the platform's libm (Rust's `f64::sin` and friends call it, as Redis
//! does), so the same members are found at the same distances, to the bit. Where Redis leans
//! on C behaviour it is reproduced too: a score that is no geohash is decoded through x86-64's
//! double-to-`uint64_t` conversion, results are ordered by glibc's `qsort` (a merge sort)
//! or, with COUNT, Redis's partial quicksort `pqsort`, and the option words are compared as
//! C strings (up to a NUL byte).
//!
//! A search reads its source (and a FROMMEMBER / BYMEMBER centre) in one snapshot; the STORE
//! forms then replace the destination, as ZRANGESTORE does (not atomically with the read).

use std::cmp::Ordering;

use larder_engine::{Coll, Kind};

use crate::command::{Argv, CmdError, Ctx, Spec, DENYOOM, MOVABLEKEYS, READONLY, WRITE};
use crate::families::string::count_lookup;
use crate::families::zset::{notify_zadd, op_store, op_zadd, parse_score, ZAddFlags};
use crate::notify::{self, GENERIC, ZSET};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "geoadd", arity: -5, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Add one or more geospatial items in the geospatial index represented using a sorted set", handler: cmd_geoadd },
    Spec { name: "geodist", arity: -4, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Returns the distance between two members of a geospatial index", handler: cmd_geodist },
    Spec { name: "geohash", arity: -2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Returns members of a geospatial index as standard geohash strings", handler: cmd_geohash },
    Spec { name: "geopos", arity: -2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Returns longitude and latitude of members of a geospatial index", handler: cmd_geopos },
    Spec { name: "georadius", arity: -6, flags: WRITE | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", handler: cmd_georadius },
    Spec { name: "georadius_ro", arity: -6, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "A read-only variant for GEORADIUS", handler: cmd_georadius_ro },
    Spec { name: "georadiusbymember", arity: -5, flags: WRITE | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", handler: cmd_georadiusbymember },
    Spec { name: "georadiusbymember_ro", arity: -5, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "A read-only variant for GEORADIUSBYMEMBER", handler: cmd_georadiusbymember_ro },
    Spec { name: "geosearch", arity: -7, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "geo", summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", handler: cmd_geosearch },
    Spec { name: "geosearchstore", arity: -8, flags: WRITE | DENYOOM, first_key: 1, last_key: 2, step: 1, group: "geo", summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", handler: cmd_geosearchstore },
];

// ---- the geohash (geohash.c) ----

/// Bits per coordinate of a stored point (26 * 2 = 52, all a double holds exactly).
const STEP_MAX: u8 = 26;
// Limits from EPSG:900913 / EPSG:3785 / OSGEO:41001: no geocoding at the poles.
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;

/// A cell: `step` bits of each coordinate, interleaved in the low `2 * step` bits. Zero bits
/// and zero step is "no cell" (an excluded neighbour).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    fn is_zero(self) -> bool {
        self.min == 0.0 && self.max == 0.0
    }
}

/// A cell and the coordinates it spans.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Area {
    pub hash: HashBits,
    pub longitude: Range,
    pub latitude: Range,
}

/// The eight cells around one, in the order of Redis's `GeoHashNeighbors`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Neighbors {
    pub north: HashBits,
    pub east: HashBits,
    pub west: HashBits,
    pub south: HashBits,
    pub north_east: HashBits,
    pub south_east: HashBits,
    pub north_west: HashBits,
    pub south_west: HashBits,
}

/// Redis's coordinate ranges (WGS84 longitude, Mercator-limited latitude).
const LONG_RANGE: Range = Range { min: LONG_MIN, max: LONG_MAX };
const LAT_RANGE: Range = Range { min: LAT_MIN, max: LAT_MAX };

/// The bits of `x` in the even positions and those of `y` in the odd ones.
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] =
        [0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (xlo as u64, ylo as u64);
    for k in (0..5).rev() {
        x = (x | (x << S[k])) & B[k];
        y = (y | (y << S[k])) & B[k];
    }
    x | (y << 1)
}

/// The even bits in the low half, the odd ones in the high half.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for k in 0..6 {
        x = (x | (x >> S[k])) & B[k];
        y = (y | (y >> S[k])) & B[k];
    }
    x | (y << 32)
}

/// `geohashEncode`: the cell of `step` bits holding the point, or None outside the ranges
/// (or Redis's limits). The coordinates' offsets are truncated to integers as C converts a
/// double to `uint32_t`.
pub fn encode(long_range: Range, lat_range: Range, longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    if step > 32 || step == 0 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min || latitude > lat_range.max || longitude < long_range.min || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    Some(HashBits { bits: interleave64(lat_offset as u32, long_offset as u32), step })
}

/// `geohashEncodeWGS84`.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// `geohashDecode`: the coordinates a cell spans (None for the zero cell).
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    // `(ilato + 1)` is an unsigned int sum in C: it wraps.
    let cells = (1u64 << step) as f64;
    Some(Area {
        hash,
        latitude: Range {
            min: lat_range.min + (ilato as f64 * 1.0 / cells) * lat_scale,
            max: lat_range.min + (ilato.wrapping_add(1) as f64 * 1.0 / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 * 1.0 / cells) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 * 1.0 / cells) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the centre of the area, held inside Redis's limits.
fn area_center(area: &Area) -> [f64; 2] {
    // As C compares (no NaN comes here, so f64::clamp would do the same).
    let clamp = |v: f64, lo: f64, hi: f64| {
        if v > hi {
            hi
        } else if v < lo {
            lo
        } else {
            v
        }
    };
    [
        clamp((area.longitude.min + area.longitude.max) / 2.0, LONG_MIN, LONG_MAX),
        clamp((area.latitude.min + area.latitude.max) / 2.0, LAT_MIN, LAT_MAX),
    ]
}

/// 2^63, where C's conversions of a double to a 64-bit integer run out.
const TWO63: f64 = (1u64 << 63) as f64;

/// C's `(uint64_t) d` as gcc compiles it for x86-64: below 2^63 a signed truncation
/// (`cvttsd2si`, whose out-of-range and NaN answer is 2^63), else the same of `d - 2^63`
/// with the top bit flipped. A sorted set may hold any score; Redis decodes it this way.
fn c_double_to_u64(d: f64) -> u64 {
    let cvttsd2si = |v: f64| -> u64 {
        if (-TWO63..TWO63).contains(&v) {
            v as i64 as u64
        } else {
            1 << 63
        }
    };
    if d >= TWO63 {
        cvttsd2si(d - TWO63) ^ (1 << 63)
    } else {
        cvttsd2si(d)
    }
}

/// `decodeGeohash`: a score's point (the centre of its 52-bit cell).
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits { bits: c_double_to_u64(score), step: STEP_MAX };
    // The step is never 0, so the cell is never the zero cell.
    decode(LONG_RANGE, LAT_RANGE, hash).map(|a| area_center(&a)).unwrap_or([0.0, 0.0])
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let shift = 64 - hash.step as u32 * 2;
    let zz = 0x5555555555555555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let shift = 64 - hash.step as u32 * 2;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> shift;
    hash.bits = x | y;
}

/// `geohashNeighbors` (wrapping around at the edges of the map).
pub fn neighbors(hash: HashBits) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

// ---- the search area (geohash_helper.c) ----

const D_R: f64 = std::f64::consts::PI / 180.0;
/// Earth's quadratic mean radius for WGS-84.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A search area: a circle or an axis-aligned box around a centre, in a unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub kind: ShapeKind,
    /// The centre: longitude, latitude.
    pub xy: [f64; 2],
    /// Meters per unit (km: 1000).
    pub conversion: f64,
}

/// The 9 cells to read for a search, and the centre cell's area.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Areas {
    pub hash: HashBits,
    pub area: Area,
    pub neighbors: Neighbors,
}

/// `geohashEstimateStepsByRadius`: the bits per coordinate of cells about as large as the
/// search, fewer near the poles.
pub fn estimate_steps_by_radius(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2; // Make sure range is included in most of the base cases.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// `geohashBoundingBox`: min longitude, min latitude, max longitude, max latitude. The
/// meridians converge, so the wider edge (south in the north, north in the south) sets the
/// longitudes.
pub fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [longitude, latitude] = shape.xy;
    let (h, w) = match shape.kind {
        ShapeKind::Radius(r) => (r, r),
        ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * h;
    let width = shape.conversion * w;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    [
        if southern { longitude - long_delta_bottom } else { longitude - long_delta_top },
        latitude - lat_delta,
        if southern { longitude + long_delta_bottom } else { longitude + long_delta_top },
        latitude + lat_delta,
    ]
}

/// `geohashCalculateAreasByShapeWGS84`: the centre's cell at an estimated step (one less if
/// a neighbour does not reach the bounding box), and its neighbours, with those that lie
/// wholly outside the bounding box zeroed.
pub fn calculate_areas(shape: &Shape) -> Areas {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [longitude, latitude] = shape.xy;
    let mut radius_meters = match shape.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
    };
    radius_meters *= shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    // The centre is inside the limits (checked, or a decoded point): encoding succeeds.
    let cell = |steps| {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or_default();
        (hash, neighbors(hash), decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default())
    };
    let (mut hash, mut nb, mut area) = cell(steps);
    let dec = |h| decode(LONG_RANGE, LAT_RANGE, h).unwrap_or_default();
    let (north, south, east, west) = (dec(nb.north), dec(nb.south), dec(nb.east), dec(nb.west));
    let decrease_step = north.latitude.max < max_lat
        || south.latitude.min > min_lat
        || east.longitude.max < max_lon
        || west.longitude.min > min_lon;
    if steps > 1 && decrease_step {
        steps -= 1;
        (hash, nb, area) = cell(steps);
    }
    if steps >= 2 {
        let zero = HashBits::default();
        if area.latitude.min < min_lat {
            (nb.south, nb.south_west, nb.south_east) = (zero, zero, zero);
        }
        if area.latitude.max > max_lat {
            (nb.north, nb.north_east, nb.north_west) = (zero, zero, zero);
        }
        if area.longitude.min < min_lon {
            (nb.west, nb.south_west, nb.north_west) = (zero, zero, zero);
        }
        if area.longitude.max > max_lon {
            (nb.east, nb.south_east, nb.north_east) = (zero, zero, zero);
        }
    }
    Areas { hash, area, neighbors: nb }
}

/// `geohashAlign52Bits`: a cell as the lowest score inside it.
pub fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - hash.step as u32 * 2)
}

/// `geohashGetLatDistance`: the distance along a meridian.
fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// `geohashGetDistance`: the haversine great-circle distance, in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    // Same longitude: the cheaper distance along the meridian.
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// `geoWithinShape`: the point of `score` and its distance from the centre (meters), if it
/// is inside the shape. Redis tests "outside" (`>`), so a NaN distance counts as inside.
fn within_shape(shape: &Shape, score: f64) -> Option<([f64; 2], f64)> {
    let xy = decode_score(score);
    let [x1, y1] = shape.xy;
    match shape.kind {
        ShapeKind::Radius(r) => {
            let d = distance(x1, y1, xy[0], xy[1]);
            if d > r * shape.conversion {
                return None;
            }
            Some((xy, d))
        }
        ShapeKind::Box { width, height } => {
            let (width_m, height_m) = (width * shape.conversion, height * shape.conversion);
            // Latitude first: cheaper.
            if lat_distance(xy[1], y1) > height_m / 2.0 {
                return None;
            }
            if distance(xy[0], xy[1], x1, xy[1]) > width_m / 2.0 {
                return None;
            }
            Some((xy, distance(x1, y1, xy[0], xy[1])))
        }
    }
}

// ---- sorting as Redis's C library sorts ----

/// glibc 2.36's `qsort` (`msort_with_tmp`): a top-down merge sort that takes from the left
/// run on ties. Any stable sort gives the same order for a consistent comparison; this one
/// also agrees when a NaN distance makes it inconsistent.
fn msort(v: &mut [u32], tmp: &mut Vec<u32>, cmp: &impl Fn(u32, u32) -> Ordering) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    msort(&mut v[..n1], tmp, cmp);
    msort(&mut v[n1..], tmp, cmp);
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(v[i], v[j]) != Ordering::Greater {
            tmp.push(v[i]);
            i += 1;
        } else {
            tmp.push(v[j]);
            j += 1;
        }
    }
    tmp.extend_from_slice(&v[i..n1]);
    // What is left of the right run is already in place.
    let k = tmp.len();
    v[..k].copy_from_slice(tmp);
}

fn med3(v: &[u32], a: usize, b: usize, c: usize, cmp: &impl Fn(u32, u32) -> Ordering) -> usize {
    let lt = |x: usize, y: usize| cmp(v[x], v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(v[x], v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

/// Redis's `pqsort` (Bentley & McIlroy's quicksort, only recursing into parts that overlap
/// positions `lrange..=rrange`): afterwards those positions hold what a full sort would put
/// there, the rest is partly sorted. Ported on element positions instead of byte pointers.
fn pqsort(v: &mut [u32], lrange: usize, rrange: usize, cmp: &impl Fn(u32, u32) -> Ordering) {
    pqsort_part(v, 0, v.len(), lrange, rrange, cmp);
}

/// [`pqsort`] of the part `v[a..a + n]` (positions stay absolute).
fn pqsort_part(
    v: &mut [u32],
    mut a: usize,
    mut n: usize,
    lrange: usize,
    rrange: usize,
    cmp: &impl Fn(u32, u32) -> Ordering,
) {
    let c = |v: &[u32], x: usize, y: usize| cmp(v[x], v[y]);
    // Whether the part at `l` of `len` elements holds a position of the range.
    let overlaps = |l: usize, len: usize| !(rrange < l || lrange >= l + len);
    let vecswap = |v: &mut [u32], x: usize, y: usize, k: usize| {
        for i in 0..k {
            v.swap(x + i, y + i);
        }
    };
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && c(v, pl - 1, pl) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        // The pivot at `a`; equal elements gather at both ends, then move to the middle.
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = c(v, pb, a);
                if r == Ordering::Greater {
                    break;
                }
                if r == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = c(v, pc, a);
                if r == Ordering::Less {
                    break;
                }
                if r == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && overlaps(a, r) {
            pqsort_part(v, a, r, lrange, rrange, cmp);
        }
        let r = pd - pc;
        if r > 1 && overlaps(pn - r, r) {
            // The right part: iterate rather than recurse, as the C code.
            (a, n) = (pn - r, r);
            continue;
        }
        return;
    }
}

// ---- replies ----

/// Redis's `addReplyDoubleDistance`: 4 decimals (`fixedpoint_d2string`: `llrint` of
/// `d * 10^4`, ties to even; out of range, as x86's `llrint`, the most negative integer).
pub fn fmt_distance(d: f64) -> Vec<u8> {
    if d == 0.0 {
        return b"0.0000".to_vec();
    }
    let scaled = (d * 10000.0).round_ties_even();
    let sv = if (-TWO63..TWO63).contains(&scaled) { scaled as i64 } else { i64::MIN };
    let digits = format!("{:05}", sv.unsigned_abs());
    let (int, frac) = digits.split_at(digits.len() - 4);
    format!("{}{int}.{frac}", if sv < 0 { "-" } else { "" }).into_bytes()
}

/// Redis's `ld2string(.., LD_STR_HUMAN)` of a double: `%.17Lf` (the double is exact in a long
/// double, so this is the exact value rounded to 17 decimals, ties to even, as Rust's `{:.17}`),
/// trailing zeros and point removed, and `-0` written `0`.
pub fn fmt_human(d: f64) -> Vec<u8> {
    if d.is_infinite() {
        return if d > 0.0 { b"inf".to_vec() } else { b"-inf".to_vec() };
    }
    let mut s = format!("{d:.17}").into_bytes();
    if s.contains(&b'.') {
        while s.last() == Some(&b'0') {
            s.pop();
        }
        if s.last() == Some(&b'.') {
            s.pop();
        }
    }
    if s == b"-0" {
        s = b"0".to_vec();
    }
    s
}

/// `addReplyHumanLongDouble`: a bulk string in RESP2, a double in RESP3.
fn reply_human(ctx: &mut Ctx<'_>, d: f64) {
    crate::families::zset::reply_double_text(ctx, &fmt_human(d));
}

/// The standard 11-character geohash of a score's point (Redis re-encodes it over latitudes
/// -90..90; the 11th character stands for bits it does not have).
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let xy = decode_score(score);
    let r = (Range { min: -180.0, max: 180.0 }, Range { min: -90.0, max: 90.0 });
    let hash = encode(r.0, r.1, xy[0], xy[1], 26).unwrap_or_default();
    let mut out = [0u8; 11];
    for (i, c) in out.iter_mut().enumerate() {
        let idx = if i == 10 { 0 } else { (hash.bits >> (52 - (i + 1) * 5)) & 0x1f };
        *c = ALPHABET[idx as usize];
    }
    out
}

// ---- arguments ----

/// C's `strcasecmp(arg, word) == 0`: the argument is read as a C string, up to a NUL.
fn is(arg: &[u8], word: &str) -> bool {
    let end = arg.iter().position(|&c| c == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// `getDoubleFromObjectOrReply`, with Redis's message (or "value is not a valid float").
fn double_arg(arg: &[u8], msg: Option<&str>) -> Result<f64, CmdError> {
    parse_score(arg).ok_or_else(|| match msg {
        Some(m) => CmdError::new(format!("ERR {m}")),
        None => CmdError::not_float(),
    })
}

/// `extractLongLatOrReply`: a longitude and a latitude inside Redis's limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let xy = [double_arg(lon, None)?, double_arg(lat, None)?];
    if xy[0] < LONG_MIN || xy[0] > LONG_MAX || xy[1] < LAT_MIN || xy[1] > LAT_MAX {
        return Err(CmdError::new(format!("ERR invalid longitude,latitude pair {:.6},{:.6}", xy[0], xy[1])));
    }
    Ok(xy)
}

/// `extractUnitOrReply`: meters per unit.
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    for (name, m) in [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)] {
        if is(arg, name) {
            return Ok(m);
        }
    }
    Err(CmdError::new("ERR unsupported unit provided. please use M, KM, FT, MI"))
}

/// `extractDistanceOrReply`: a radius and its unit.
fn radius_arg(n: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = double_arg(n, Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::new("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

/// `extractBoxOrReply`: width, height and their unit.
fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = double_arg(w, Some("need numeric width"))?;
    let h = double_arg(h, Some("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::new("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

// ---- the search (georadiusGeneric) ----

// Which command runs the search.
const RADIUS_COORDS: u8 = 1; // GEORADIUS[_RO]: centre and radius given
const RADIUS_MEMBER: u8 = 2; // GEORADIUSBYMEMBER[_RO]: centre at a member
const RADIUS_NOSTORE: u8 = 4; // the _RO forms: no STORE / STOREDIST
const GEOSEARCH: u8 = 8; // GEOSEARCH and GEOSEARCHSTORE's options
const GEOSEARCHSTORE: u8 = 16; // GEOSEARCHSTORE: STOREDIST alone

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A search's parsed arguments.
#[derive(Clone, Copy, Debug)]
struct Query {
    shape: Shape,
    withdist: bool,
    withhash: bool,
    withcoords: bool,
    sort: Sort,
    any: bool,
    /// At most this many results; 0: all.
    count: u64,
    /// The destination's argument index (STORE, STOREDIST, GEOSEARCHSTORE).
    store: Option<usize>,
    storedist: bool,
}

/// A point found.
#[derive(Clone, Debug)]
struct Point {
    xy: [f64; 2],
    /// Meters from the centre.
    dist: f64,
    score: f64,
    member: Vec<u8>,
}

/// `longLatFromMember`: the point of member `m`.
fn member_xy(zset: &mut Option<&mut Coll<'_>>, m: &[u8]) -> Result<[f64; 2], CmdError> {
    let score = match zset {
        Some(c) => c.score(m)?,
        None => None,
    };
    score.map(decode_score).ok_or_else(|| CmdError::new("ERR could not decode requested zset member"))
}

/// Redis's `georadiusGeneric` up to the search: the arguments in its order, errors in its
/// order. `zset` is the source (None if missing): a centre member is looked up in it while
/// the options are read, as Redis does, so an unknown member is reported before a later bad
/// option.
fn parse_query(argv: Argv<'_>, flags: u8, mut zset: Option<&mut Coll<'_>>) -> Result<Query, CmdError> {
    let mut q = Query {
        shape: Shape { kind: ShapeKind::Radius(0.0), xy: [0.0, 0.0], conversion: 0.0 },
        withdist: false,
        withhash: false,
        withcoords: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: None,
        storedist: false,
    };
    let base;
    if flags & RADIUS_COORDS != 0 {
        base = 6;
        q.shape.xy = lon_lat(argv.get(2), argv.get(3))?;
        let (r, conv) = radius_arg(argv.get(4), argv.get(5))?;
        (q.shape.kind, q.shape.conversion) = (ShapeKind::Radius(r), conv);
    } else if flags & RADIUS_MEMBER != 0 {
        base = 5;
        // Without a source the rest is still parsed, for the right kind of empty reply.
        if zset.is_some() {
            q.shape.xy = member_xy(&mut zset, argv.get(2))?;
            let (r, conv) = radius_arg(argv.get(3), argv.get(4))?;
            (q.shape.kind, q.shape.conversion) = (ShapeKind::Radius(r), conv);
        }
    } else {
        base = if flags & GEOSEARCHSTORE != 0 { 3 } else { 2 };
        if flags & GEOSEARCHSTORE != 0 {
            q.store = Some(1);
        }
    }
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let search = flags & GEOSEARCH != 0;
    let storable = flags & (RADIUS_NOSTORE | GEOSEARCH) == 0;
    let remaining = argv.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let arg = argv.get(at);
        if is(arg, "withdist") {
            q.withdist = true;
        } else if is(arg, "withhash") {
            q.withhash = true;
        } else if is(arg, "withcoord") {
            q.withcoords = true;
        } else if is(arg, "any") {
            q.any = true;
        } else if is(arg, "asc") {
            q.sort = Sort::Asc;
        } else if is(arg, "desc") {
            q.sort = Sort::Desc;
        } else if is(arg, "count") && i + 1 < remaining {
            let n = crate::command::parse_i64(argv.get(at + 1)).ok_or_else(CmdError::not_integer)?;
            if n <= 0 {
                return Err(CmdError::new("ERR COUNT must be > 0"));
            }
            q.count = n as u64;
            i += 1;
        } else if is(arg, "store") && i + 1 < remaining && storable {
            (q.store, q.storedist) = (Some(at + 1), false);
            i += 1;
        } else if is(arg, "storedist") && i + 1 < remaining && storable {
            (q.store, q.storedist) = (Some(at + 1), true);
            i += 1;
        } else if is(arg, "storedist") && search && flags & GEOSEARCHSTORE != 0 {
            q.storedist = true;
        } else if is(arg, "frommember") && i + 1 < remaining && search && !fromloc {
            if zset.is_some() {
                q.shape.xy = member_xy(&mut zset, argv.get(at + 1))?;
            }
            frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && i + 2 < remaining && search && !frommember {
            q.shape.xy = lon_lat(argv.get(at + 1), argv.get(at + 2))?;
            fromloc = true;
            i += 2;
        } else if is(arg, "byradius") && i + 2 < remaining && search && !bybox {
            let (r, conv) = radius_arg(argv.get(at + 1), argv.get(at + 2))?;
            (q.shape.kind, q.shape.conversion) = (ShapeKind::Radius(r), conv);
            byradius = true;
            i += 2;
        } else if is(arg, "bybox") && i + 3 < remaining && search && !byradius {
            let (width, height, conv) = box_arg(argv.get(at + 1), argv.get(at + 2), argv.get(at + 3))?;
            (q.shape.kind, q.shape.conversion) = (ShapeKind::Box { width, height }, conv);
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoords) {
        let what = if flags & GEOSEARCHSTORE != 0 { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::new(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = || {
        let a = argv.get(0);
        String::from_utf8_lossy(&a[..a.iter().position(|&c| c == 0).unwrap_or(a.len())]).into_owned()
    };
    if search && !(frommember || fromloc) {
        return Err(CmdError::new(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            name()
        )));
    }
    if search && !(byradius || bybox) {
        return Err(CmdError::new(format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {}", name())));
    }
    if q.any && q.count == 0 {
        return Err(CmdError::new("ERR the ANY argument requires COUNT argument"));
    }
    Ok(q)
}

/// The score range of a cell: `[align52(cell), align52(cell + 1))` (`scoresOfGeoHashBox`).
fn cell_scores(hash: HashBits) -> (f64, f64) {
    let next = HashBits { bits: hash.bits + 1, step: hash.step };
    (align52(hash) as f64, align52(next) as f64)
}

/// `membersOfAllNeighbors`: the points inside the shape from the centre cell and its
/// neighbours, cell by cell in score order; stops at `limit` points (0: no limit).
fn op_search(c: &mut Coll<'_>, shape: &Shape, limit: u64) -> Result<Vec<Point>, CmdError> {
    let areas = calculate_areas(shape);
    let nb = areas.neighbors;
    let cells =
        [areas.hash, nb.north, nb.south, nb.east, nb.west, nb.north_east, nb.north_west, nb.south_east, nb.south_west];
    let full = |n: usize| n > 0 && limit > 0 && n as u64 >= limit;
    let mut out = Vec::new();
    let mut last = 0;
    for (i, &cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        // A huge radius makes adjacent neighbours the same cell. (Redis compares with the
        // last cell read only once one past the centre was read.)
        if last != 0 && cell == cells[last] {
            continue;
        }
        if full(out.len()) {
            break;
        }
        let (min, max) = cell_scores(cell);
        let from = c.zseek_score(min, false)?;
        let to = c.zseek_score(max, false)?;
        c.range(from, to, |m, v| {
            let score = v.try_into().map(f64::from_le_bytes).unwrap_or(0.0);
            if let Some((xy, dist)) = within_shape(shape, score) {
                out.push(Point { xy, dist, score, member: m.to_vec() });
            }
            !full(out.len())
        })?;
        last = i;
    }
    Ok(out)
}

/// The order results are answered in: Redis's `sort_gp_asc` (a NaN is "less") or its
/// reverse, the whole by `qsort`, or only the first `returned` by `pqsort` (the rest of the
/// order is then whatever the partial sort left).
fn result_order(dists: &[f64], sort: Sort, returned: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..dists.len() as u32).collect();
    let asc = |a: u32, b: u32| {
        let (x, y) = (dists[a as usize], dists[b as usize]);
        if x > y {
            Ordering::Greater
        } else if x == y {
            Ordering::Equal
        } else {
            Ordering::Less
        }
    };
    let cmp = |a: u32, b: u32| if sort == Sort::Desc { asc(a, b).reverse() } else { asc(a, b) };
    if sort != Sort::None {
        if returned == dists.len() {
            msort(&mut order, &mut Vec::with_capacity(dists.len()), &cmp);
        } else if returned > 0 {
            pqsort(&mut order, 0, returned - 1, &cmp);
        }
    }
    order
}

fn georadius_generic(ctx: &mut Ctx<'_>, src: usize, flags: u8) -> Result<(), CmdError> {
    let argv = ctx.argv;
    let db = ctx.conn.db;
    let found = ctx.h.coll_read(db, argv.get(src), Kind::ZSet, |c| {
        Ok(parse_query(argv, flags, Some(&mut *c)).and_then(|mut q| {
            // COUNT asks for the nearest: sorted, unless ANY takes the first found.
            if q.count != 0 && q.sort == Sort::None && !q.any {
                q.sort = Sort::Asc;
            }
            let points = op_search(c, &q.shape, if q.any { q.count } else { 0 })?;
            Ok((q, points))
        }))
    })?;
    count_lookup(ctx, argv.get(src), found.is_some());
    // Only a STORE that stored or deleted something is a change.
    ctx.conn.unchanged = true;
    let Some(found) = found else {
        let q = parse_query(argv, flags, None)?;
        match q.store {
            Some(d) => {
                let deleted = notify::Replace::delete(ctx.h, db, argv.get(d))?;
                ctx.conn.unchanged = !deleted;
                if deleted {
                    notify::notify(ctx, GENERIC, "del", argv.get(d));
                }
                ctx.out.integer(0);
            }
            None => {
                ctx.out.array(0);
            }
        }
        return Ok(());
    };
    let (q, points) = found?;
    if points.is_empty() && q.store.is_none() {
        ctx.out.array(0);
        return Ok(());
    }
    let returned = if q.count == 0 || (points.len() as u64) < q.count { points.len() } else { q.count as usize };
    let dists: Vec<f64> = points.iter().map(|p| p.dist).collect();
    let order = &result_order(&dists, q.sort, returned)[..returned];
    if let Some(d) = q.store {
        let dst = argv.get(d);
        let (stored, existed) = if returned == 0 {
            let existed = notify::Replace::delete(ctx.h, db, dst)?;
            ctx.conn.unchanged = !existed;
            (false, existed)
        } else {
            let items: Vec<(Vec<u8>, f64)> = order
                .iter()
                .map(|&i| {
                    let p = &points[i as usize];
                    (p.member.clone(), if q.storedist { p.dist / q.shape.conversion } else { p.score })
                })
                .collect();
            let (_, existed) = op_store(ctx.h, db, dst, &items)?;
            ctx.conn.unchanged = false;
            (true, existed)
        };
        let event = if flags & GEOSEARCH != 0 { "geosearchstore" } else { "georadiusstore" };
        notify::notify_store(ctx, ZSET, event, dst, stored, existed);
        ctx.out.integer(returned as i64);
        return Ok(());
    }
    let options = q.withdist as usize + q.withcoords as usize + q.withhash as usize;
    ctx.out.array(returned);
    for &i in order {
        let p = &points[i as usize];
        if options > 0 {
            ctx.out.array(options + 1);
        }
        ctx.out.bulk(&p.member);
        if q.withdist {
            ctx.out.bulk(&fmt_distance(p.dist / q.shape.conversion));
        }
        if q.withhash {
            ctx.out.integer(p.score as i64);
        }
        if q.withcoords {
            ctx.out.array(2);
            reply_human(ctx, p.xy[0]);
            reply_human(ctx, p.xy[1]);
        }
    }
    Ok(())
}

/// The keys of GEORADIUS (`startfrom` 6) and GEORADIUSBYMEMBER (5), for COMMAND GETKEYS, as
/// Redis 7.0's key specs find them: the source, then the key after the first `STORE` from
/// argument `startfrom` on, then the one after the first `STOREDIST` (the last argument is
/// not searched: it has nothing after it).
pub fn key_positions(args: &[&[u8]], startfrom: usize) -> Vec<usize> {
    let mut keys = vec![1];
    for word in ["store", "storedist"] {
        if let Some(i) = (startfrom..args.len().saturating_sub(1)).find(|&i| is(args[i], word)) {
            keys.push(i + 1);
        }
    }
    keys
}

// ---- commands ----

/// # Format
/// `GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]` →
/// members added (with CH: added or moved). As Redis, a ZADD of the members at their
/// geohash scores.
fn cmd_geoadd(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (mut xx, mut nx, mut ch) = (false, false, false);
    let mut longidx = 2;
    while longidx < ctx.argc() {
        let o = ctx.arg(longidx);
        if is(o, "nx") {
            nx = true;
        } else if is(o, "xx") {
            xx = true;
        } else if is(o, "ch") {
            ch = true;
        } else {
            break;
        }
        longidx += 1;
    }
    let elements = (ctx.argc() - longidx) / 3;
    // (No triple at all gets past this check, and is ZADD's syntax error instead.)
    if !(ctx.argc() - longidx).is_multiple_of(3) || (xx && nx) || elements == 0 {
        return Err(CmdError::syntax());
    }
    let mut pairs = Vec::with_capacity(elements);
    for j in (longidx..ctx.argc()).step_by(3) {
        let [lon, lat] = lon_lat(ctx.arg(j), ctx.arg(j + 1))?;
        let hash = encode_wgs84(lon, lat, STEP_MAX).unwrap_or_default();
        pairs.push((align52(hash) as f64, ctx.arg(j + 2)));
    }
    let f = ZAddFlags { nx, xx, ..Default::default() };
    let out = op_zadd(ctx.h, ctx.conn.db, ctx.arg(1), f, &pairs)?;
    ctx.out.integer((if ch { out.added + out.updated } else { out.added }) as i64);
    notify_zadd(ctx, ctx.arg(1), f, &out);
    Ok(())
}

/// # Format
/// `GEODIST key member1 member2 [M|KM|FT|MI]` → the distance (4 decimals), or null when a
/// member (or the key) is missing.
fn cmd_geodist(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let to_meter = match ctx.argc() {
        5 => unit(ctx.arg(4))?,
        n if n > 5 => return Err(CmdError::syntax()),
        _ => 1.0,
    };
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::ZSet, |c| Ok((c.score(a)?, c.score(b)?)))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    match r {
        Some((Some(s1), Some(s2))) => {
            let (p, q) = (decode_score(s1), decode_score(s2));
            ctx.out.bulk(&fmt_distance(distance(p[0], p[1], q[0], q[1]) / to_meter));
        }
        _ => {
            ctx.out.null();
        }
    }
    Ok(())
}

/// The scores of members `2..` of the sorted set at argument 1 (None per missing member).
fn member_scores(ctx: &mut Ctx<'_>) -> Result<Vec<Option<f64>>, CmdError> {
    let argv = ctx.argv;
    let r = ctx.h.coll_read(ctx.conn.db, argv.get(1), Kind::ZSet, |c| {
        argv.iter().skip(2).map(|m| c.score(m)).collect::<Result<Vec<_>, _>>()
    })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    Ok(r.unwrap_or_else(|| vec![None; argv.len() - 2]))
}

/// # Format
/// `GEOHASH key [member ...]` → an 11-character geohash per member, or null.
fn cmd_geohash(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let scores = member_scores(ctx)?;
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.out.bulk(&geohash_string(s)),
            None => ctx.out.null(),
        };
    }
    Ok(())
}

/// # Format
/// `GEOPOS key [member ...]` → `[longitude, latitude]` per member, or a null array.
fn cmd_geopos(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let scores = member_scores(ctx)?;
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let xy = decode_score(s);
                ctx.out.array(2);
                reply_human(ctx, xy[0]);
                reply_human(ctx, xy[1]);
            }
            None => {
                ctx.out.null_array();
            }
        }
    }
    Ok(())
}

/// # Format
/// `GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]` → members (each with what
/// was asked for: `[member, dist, hash, [lon, lat]]`), or with STORE the number stored.
fn cmd_georadius(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 1, RADIUS_COORDS)
}

/// # Format
/// `GEORADIUS_RO key longitude latitude radius unit [options]` → GEORADIUS without STORE.
fn cmd_georadius_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 1, RADIUS_COORDS | RADIUS_NOSTORE)
}

/// # Format
/// `GEORADIUSBYMEMBER key member radius unit [options]` → GEORADIUS around a member.
fn cmd_georadiusbymember(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 1, RADIUS_MEMBER)
}

/// # Format
/// `GEORADIUSBYMEMBER_RO key member radius unit [options]` → without STORE.
fn cmd_georadiusbymember_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 1, RADIUS_MEMBER | RADIUS_NOSTORE)
}

/// # Format
/// `GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius unit|BYBOX
/// width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]` →
/// as GEORADIUS.
fn cmd_geosearch(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 1, GEOSEARCH)
}

/// # Format
/// `GEOSEARCHSTORE destination source FROMMEMBER ...|FROMLONLAT ... BYRADIUS ...|BYBOX ...
/// [ASC|DESC] [COUNT count [ANY]] [STOREDIST]` → the number of members stored.
fn cmd_geosearchstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    georadius_generic(ctx, 2, GEOSEARCH | GEOSEARCHSTORE)
}

// Generated tables: one line per case, their tuple types spelled out.
#[cfg(test)]
#[rustfmt::skip]
#[allow(clippy::type_complexity)]
#[path = "geo_golden.rs"]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;

    fn f(bits: u64) -> f64 {
        f64::from_bits(bits)
    }

    fn text(v: Vec<u8>) -> String {
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn interleave_round_trips() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (a, b) = (x as u32, (x >> 32) as u32);
            let i = interleave64(a, b);
            for k in 0..32 {
                assert_eq!((i >> (2 * k)) & 1, (a as u64 >> k) & 1);
                assert_eq!((i >> (2 * k + 1)) & 1, (b as u64 >> k) & 1);
            }
            assert_eq!(deinterleave64(i), a as u64 | (b as u64) << 32);
        }
    }

    /// GEOADD's score, GEOPOS's point and text and GEOHASH's string of each point, against
    /// Redis's C code (scripts/geo-golden.c).
    #[test]
    fn points_encode_and_decode_as_redis() {
        for &(lon, lat, score, x, y, hash, tx, ty) in golden::POINTS {
            let (lon, lat) = (f(lon), f(lat));
            let h = encode_wgs84(lon, lat, STEP_MAX).unwrap();
            assert_eq!(align52(h), score, "{lon} {lat}");
            let xy = decode_score(score as f64);
            assert_eq!((xy[0].to_bits(), xy[1].to_bits()), (x, y), "{lon} {lat}");
            assert_eq!(&geohash_string(score as f64), hash.as_bytes(), "{lon} {lat}");
            assert_eq!((text(fmt_human(xy[0])), text(fmt_human(xy[1]))), (tx.to_string(), ty.to_string()));
        }
    }

    /// Scores no GEOADD writes (negative, huge, infinite, fractional) decode as Redis's
    /// `(uint64_t)` conversion makes them.
    #[test]
    fn any_score_decodes_as_redis() {
        for &(score, x, y, hash) in golden::SCORES {
            let xy = decode_score(f(score));
            assert_eq!((xy[0].to_bits(), xy[1].to_bits()), (x, y), "{}", f(score));
            assert_eq!(&geohash_string(f(score)), hash.as_bytes(), "{}", f(score));
        }
    }

    #[test]
    fn search_areas_are_redis_cells() {
        for &(ty, lon, lat, a, b, conv, bounds, (hash, step), nb) in golden::SHAPES {
            let kind = if ty == 1 { ShapeKind::Radius(f(a)) } else { ShapeKind::Box { width: f(a), height: f(b) } };
            let shape = Shape { kind, xy: [f(lon), f(lat)], conversion: f(conv) };
            let got = bounding_box(&shape).map(f64::to_bits);
            assert_eq!(got, bounds, "{shape:?}");
            let r = calculate_areas(&shape);
            assert_eq!(r.hash, HashBits { bits: hash, step }, "{shape:?}");
            let n = r.neighbors;
            let got = [n.north, n.east, n.west, n.south, n.north_east, n.south_east, n.north_west, n.south_west];
            let want = nb.map(|(bits, step)| HashBits { bits, step });
            assert_eq!(got, want, "{shape:?}");
        }
    }

    #[test]
    fn distances_are_redis_haversine() {
        for &(lon1, lat1, lon2, lat2, d, km) in golden::DISTANCES {
            let got = distance(f(lon1), f(lat1), f(lon2), f(lat2));
            assert_eq!(got.to_bits(), d, "{} {} {} {}", f(lon1), f(lat1), f(lon2), f(lat2));
            assert_eq!(text(fmt_distance(got / 1000.0)), km);
        }
    }

    /// glibc's qsort and Redis's pqsort, ties and NaNs included: the same permutation.
    #[test]
    fn results_sort_as_qsort_and_pqsort() {
        for &(k, desc, dists, want) in golden::SORTS {
            let sort = if desc == 1 { Sort::Desc } else { Sort::Asc };
            assert_eq!(result_order(dists, sort, k), want, "{k} {desc} {dists:?}");
        }
        assert_eq!(result_order(&[3.0, 1.0, 2.0], Sort::None, 2), [0, 1, 2]);
    }

    #[test]
    fn distances_print_with_four_decimals() {
        for (d, want) in [
            (0.0, "0.0000"),
            (-0.0, "0.0000"),
            (0.775, "0.7750"),
            (0.00005, "0.0000"),
            (0.00015, "0.0001"), // 0.00015 * 10^4 is 1.4999999999999998
            (0.0005, "0.0005"),
            (166274.15156960033, "166274.1516"),
            (-0.0005, "-0.0005"),
            (1e300, "-922337203685477.5808"),
            (f64::NAN, "-922337203685477.5808"),
        ] {
            assert_eq!(text(fmt_distance(d)), want, "{d}");
        }
    }

    #[test]
    fn coordinates_print_as_percent_17lf_trimmed() {
        assert_eq!(text(fmt_human(0.1)), "0.10000000000000001");
        assert_eq!(text(fmt_human(180.0)), "180");
        assert_eq!(text(fmt_human(-0.0)), "0");
        assert_eq!(text(fmt_human(-1e-20)), "0");
        assert_eq!(text(fmt_human(0.5)), "0.5");
        assert_eq!(text(fmt_human(f64::INFINITY)), "inf");
    }

    #[test]
    fn estimated_steps() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1.0, 0.0), 24);
        assert_eq!(estimate_steps_by_radius(1.0, 70.0), 23);
        assert_eq!(estimate_steps_by_radius(1.0, -81.0), 22);
        assert_eq!(estimate_steps_by_radius(5e7, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(f64::INFINITY, 0.0), 1);
    }

    /// COMMAND GETKEYS, checked against redis-server 7.0.15.
    #[test]
    fn store_keys_as_redis_key_specs() {
        fn keys(line: &str, from: usize) -> Vec<&str> {
            let words: Vec<&str> = line.split(' ').collect();
            let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            key_positions(&args, from).into_iter().map(|i| words[i]).collect()
        }
        assert_eq!(keys("georadius k 0 0 1 km store a storedist b", 6), ["k", "a", "b"]);
        assert_eq!(keys("georadius k 0 0 1 km storedist b store a", 6), ["k", "a", "b"]);
        assert_eq!(keys("georadius k 0 0 1 km store", 6), ["k"]);
        assert_eq!(keys("georadius k 0 0 1 store a", 6), ["k"]);
        assert_eq!(keys("georadiusbymember k m 1 km STORE a", 5), ["k", "a"]);
    }

    #[test]
    fn option_words_are_c_strings() {
        assert!(is(b"WithDist", "withdist"));
        assert!(is(b"km\0junk", "km"));
        assert!(!is(b"kmx", "km"));
        assert!(!is(b"", "km"));
    }
}
