//! GEO commands over sorted sets: GEOADD, GEOPOS, GEODIST, GEOHASH, GEORADIUS,
//! GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and GEOSEARCHSTORE.
//!
//! A position is stored as a sorted-set score: the 52-bit interleaved geohash of its
//! longitude and latitude (Redis's encoding, so `ZRANGE ... WITHSCORES`, DUMP and RDB files
//! agree with Redis). A search covers the shape with the geohash box around its centre and
//! the box's eight neighbours, reads each box's score range from the sorted set and keeps
//! the points inside the shape. Everything here is a port of Redis 7.0.15's `geo.c`,
//! `geohash.c` and `geohash_helper.c`, step for step and in the same floating-point order,
//! so that the same points are found, the same distances printed and the same scores
//! stored. The trigonometry is the `libm` crate's (musl's functions in Rust), not the host's
//! C library: a stored distance (STOREDIST) and which points a stored search keeps must be
//! the same on every replica whatever C library each node has. No geohash crate is used:
//! they take the standard -90..90 latitude range and their own neighbour search, which
//! would find different points at the edges than Redis does.

use bytes::Bytes;

use super::args::{float, int, syntax_error, CmdResult};
use super::strings::run;
use super::zsets::{read_zset, store_zset};
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::ZSET;
use crate::store::zset::{ScoreBound, SortedSet};

// ---- geohash.c ----

/// Steps of the stored hash: 26 per coordinate, 52 bits.
const STEP_MAX: u8 = 26;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;

/// A geohash of `step` bits per coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };

    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Range {
    min: f64,
    max: f64,
}

/// The coordinate ranges of the stored hashes (Web Mercator's latitude limits).
const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The box a hash stands for.
#[derive(Clone, Copy, Debug, Default)]
struct Area {
    longitude: Range,
    latitude: Range,
}

/// Interleave the bits of two 32-bit numbers: `x`'s in the even positions.
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave64`]: even bits in the low half, odd bits in the high half.
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
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `geohashEncode`: `None` outside the ranges (or a bad step).
fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<Hash> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min) * scale;
    Some(Hash {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// `geohashDecode`: the box of `hash`; `None` for the zero hash.
fn decode(long_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << hash.step) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) / div) * lat_scale,
            max: lat_range.min + ((f64::from(ilato) + 1.0) / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) / div) * long_scale,
            max: long_range.min + ((f64::from(ilono) + 1.0) / div) * long_scale,
        },
    })
}

/// The centre of a box, clamped to the valid ranges: `[longitude, latitude]`.
fn area_centre(area: &Area) -> [f64; 2] {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)` of a double as x86-64 compilers emit it, so that a score that is not a
/// geohash (a negative one, set with ZADD) decodes to the point Redis answers.
fn c_double_to_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    // cvttsd2si: the integer part, or 0x8000000000000000 when it does not fit.
    let cvtt = |v: f64| {
        if (-TWO_63..TWO_63).contains(&v) {
            v as i64 as u64
        } else {
            1 << 63
        }
    };
    if x >= TWO_63 {
        cvtt(x - TWO_63) ^ (1 << 63)
    } else {
        cvtt(x)
    }
}

/// A stored score back to `[longitude, latitude]` (`decodeGeohash`).
fn decode_score(score: f64) -> [f64; 2] {
    let hash = Hash {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    // A step-26 hash is never the zero hash: it always decodes.
    let area = decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default();
    area_centre(&area)
}

/// `geohash_move_x` / `geohash_move_y`: the hash of the next box east/west (`x`) or
/// north/south (`y`).
fn moved(hash: Hash, d: i8, x_axis: bool) -> Hash {
    if d == 0 {
        return hash;
    }
    let (own_mask, other_mask) = if x_axis {
        (0xaaaaaaaaaaaaaaaa_u64, 0x5555555555555555_u64)
    } else {
        (0x5555555555555555, 0xaaaaaaaaaaaaaaaa)
    };
    let mut own = hash.bits & own_mask;
    let other = hash.bits & other_mask;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = other_mask.checked_shr(shift).unwrap_or(0);
    if d > 0 {
        own = own.wrapping_add(zz.wrapping_add(1));
    } else {
        own |= zz;
        own = own.wrapping_sub(zz.wrapping_add(1));
    }
    own &= own_mask.checked_shr(shift).unwrap_or(0);
    Hash {
        bits: own | other,
        step: hash.step,
    }
}

/// The eight neighbours of a box, in `geohashNeighbors`'s fields.
#[derive(Clone, Copy, Debug)]
struct Neighbors {
    north: Hash,
    south: Hash,
    east: Hash,
    west: Hash,
    north_east: Hash,
    north_west: Hash,
    south_east: Hash,
    south_west: Hash,
}

fn neighbors(hash: Hash) -> Neighbors {
    let at = |dx: i8, dy: i8| moved(moved(hash, dx, true), dy, false);
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

// ---- geohash_helper.c ----

const D_R: f64 = std::f64::consts::PI / 180.0;
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// The hash step whose boxes are about the size of a search of `range_meters`.
fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers.
#[derive(Clone, Copy, Debug)]
enum Extent {
    /// BYRADIUS (GEORADIUS): a radius in the request's unit.
    Circle(f64),
    /// BYBOX: width and height in the request's unit.
    Rect { width: f64, height: f64 },
}

/// A search shape: its centre `[longitude, latitude]`, its extent and the unit's size in
/// meters.
#[derive(Clone, Copy, Debug)]
struct Shape {
    xy: [f64; 2],
    conversion: f64,
    extent: Extent,
}

impl Shape {
    /// `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]`.
    fn bounding_box(&self) -> [f64; 4] {
        let [longitude, latitude] = self.xy;
        let (height, width) = match self.extent {
            Extent::Circle(r) => (self.conversion * r, self.conversion * r),
            Extent::Rect { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / libm::cos(deg_rad(latitude + lat_delta)));
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / libm::cos(deg_rad(latitude - lat_delta)));
        let southern = latitude < 0.0;
        [
            if southern {
                longitude - long_delta_bottom
            } else {
                longitude - long_delta_top
            },
            latitude - lat_delta,
            if southern {
                longitude + long_delta_bottom
            } else {
                longitude + long_delta_top
            },
            latitude + lat_delta,
        ]
    }

    /// Whether a point is inside the shape, with its distance from the centre in meters
    /// (`geoWithinShape`).
    fn distance_within(&self, xy: [f64; 2]) -> Option<f64> {
        match self.extent {
            Extent::Circle(r) => {
                let d = distance(self.xy[0], self.xy[1], xy[0], xy[1]);
                (d <= r * self.conversion).then_some(d)
            }
            Extent::Rect { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                let [x1, y1] = self.xy;
                let [x2, y2] = xy;
                if lat_distance(y2, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }
}

/// The centre box and its neighbours to read for a search (`GeoHashRadius`); zeroed
/// neighbours are skipped.
struct Cover {
    hash: Hash,
    neighbors: Neighbors,
}

/// `geohashCalculateAreasByShapeWGS84`.
fn cover(shape: &Shape) -> Cover {
    let [min_lon, min_lat, max_lon, max_lat] = shape.bounding_box();
    let [longitude, latitude] = shape.xy;
    let radius_meters = match shape.extent {
        Extent::Circle(r) => r,
        Extent::Rect { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let locate = |steps: u8| {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or(Hash {
            bits: 0,
            step: steps,
        });
        let n = neighbors(hash);
        let area = decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default();
        (hash, n, area)
    };
    let (mut hash, mut n, mut area) = locate(steps);
    // Redis checks whether the neighbours reach the bounding box's edges and takes one
    // step larger boxes when they do not.
    let box_of = |h: Hash| decode(LONG_RANGE, LAT_RANGE, h).unwrap_or_default();
    let decrease_step = box_of(n.north).latitude.max < max_lat
        || box_of(n.south).latitude.min > min_lat
        || box_of(n.east).longitude.max < max_lon
        || box_of(n.west).longitude.min > min_lon;
    if steps > 1 && decrease_step {
        steps -= 1;
        (hash, n, area) = locate(steps);
    }
    // Leave out the neighbours that the bounding box does not reach.
    if steps >= 2 {
        if area.latitude.min < min_lat {
            n.south = Hash::ZERO;
            n.south_west = Hash::ZERO;
            n.south_east = Hash::ZERO;
        }
        if area.latitude.max > max_lat {
            n.north = Hash::ZERO;
            n.north_east = Hash::ZERO;
            n.north_west = Hash::ZERO;
        }
        if area.longitude.min < min_lon {
            n.west = Hash::ZERO;
            n.south_west = Hash::ZERO;
            n.north_west = Hash::ZERO;
        }
        if area.longitude.max > max_lon {
            n.east = Hash::ZERO;
            n.south_east = Hash::ZERO;
            n.north_east = Hash::ZERO;
        }
    }
    Cover { hash, neighbors: n }
}

/// The hash shifted to 52 bits: the low end of its boxes' scores.
fn align52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// Great-circle distance in meters (haversine), `geohashGetDistance`.
fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = libm::sin((lon2r - lon1r) / 2.0);
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = libm::sin((lat2r - lat1r) / 2.0);
    let a = u * u + libm::cos(lat1r) * libm::cos(lat2r) * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * libm::asin(a.sqrt())
}

// ---- geo.c ----

/// A point a search found.
struct Point {
    member: Bytes,
    score: f64,
    xy: [f64; 2],
    dist: f64,
}

/// The points of `z` in the score range of `hash`'s box that are inside `shape`, appended
/// to `found`; stops once `found` holds `limit` points (0: no limit).
fn points_in_box(z: &SortedSet, hash: Hash, shape: &Shape, found: &mut Vec<Point>, limit: usize) {
    let min = align52(hash);
    let max = align52(Hash {
        bits: hash.bits + 1,
        step: hash.step,
    });
    let range = z.range_by_score(
        ScoreBound::Inclusive(min as f64),
        ScoreBound::Exclusive(max as f64),
        false,
        0,
        None,
    );
    for (member, score) in range {
        let xy = decode_score(score);
        if let Some(dist) = shape.distance_within(xy) {
            found.push(Point {
                member: Bytes::copy_from_slice(member),
                score,
                xy,
                dist,
            });
        }
        if limit > 0 && found.len() >= limit {
            break;
        }
    }
}

/// `membersOfAllNeighbors`: the centre box first, then N, S, E, W, NE, NW, SE, SW; a box
/// equal to the one read before it is skipped (huge radii make neighbours coincide).
fn search(z: &SortedSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let c = cover(shape);
    let n = c.neighbors;
    let boxes = [
        c.hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ];
    let mut found = Vec::new();
    // Redis keeps the index of the box read last, and 0 (the centre) counts as none: a
    // neighbour equal to the centre box is read again.
    let mut last_processed = 0;
    for (i, &b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        if last_processed != 0 && b == boxes[last_processed] {
            continue;
        }
        if limit > 0 && found.len() >= limit {
            break;
        }
        points_in_box(z, b, shape, &mut found, limit);
        last_processed = i;
    }
    found
}

/// The unit's size in meters, or Redis's error.
fn unit(arg: &[u8]) -> CmdResult<f64> {
    let u = arg.to_ascii_lowercase();
    Ok(match &u[..] {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => {
            return Err(Reply::err(
                "ERR unsupported unit provided. please use M, KM, FT, MI",
            ))
        }
    })
}

/// A number argument with the error text Redis gives for it (`getDoubleFromObjectOrReply`).
fn number(arg: &[u8], msg: &str) -> CmdResult<f64> {
    float(arg).map_err(|_| Reply::err(format!("ERR {msg}")))
}

/// A longitude and latitude pair (`extractLongLatOrReply`).
fn lon_lat(lon: &[u8], lat: &[u8]) -> CmdResult<[f64; 2]> {
    let xy = [float(lon)?, float(lat)?];
    if !(LONG_MIN..=LONG_MAX).contains(&xy[0]) || !(LAT_MIN..=LAT_MAX).contains(&xy[1]) {
        return Err(Reply::err(format!(
            "ERR invalid longitude,latitude pair {:.6},{:.6}",
            xy[0], xy[1]
        )));
    }
    Ok(xy)
}

/// `<radius> <unit>`: the radius and the unit's size in meters.
fn radius(a: &[Bytes]) -> CmdResult<(f64, f64)> {
    let r = number(&a[0], "need numeric radius")?;
    if r < 0.0 {
        return Err(Reply::err("ERR radius cannot be negative"));
    }
    Ok((r, unit(&a[1])?))
}

/// `<width> <height> <unit>`.
fn box_size(a: &[Bytes]) -> CmdResult<(f64, f64, f64)> {
    let w = number(&a[0], "need numeric width")?;
    let h = number(&a[1], "need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(&a[2])?))
}

/// The position of `member` in `z`, or Redis's error for a member that is not there.
fn member_position(z: &SortedSet, member: &[u8]) -> CmdResult<[f64; 2]> {
    z.score(member)
        .map(decode_score)
        .ok_or_else(|| Reply::err("ERR could not decode requested zset member"))
}

/// A distance as Redis prints it: four decimals (`fixedpoint_d2string`), always a bulk
/// string.
fn distance_reply(d: f64) -> Reply {
    let v = (d * 10000.0).round_ties_even() as i64;
    let sign = if v < 0 { "-" } else { "" };
    let v = v.unsigned_abs();
    Reply::Bulk(Bytes::from(format!("{sign}{}.{:04}", v / 10000, v % 10000)))
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
///
/// As Redis does, the call becomes a ZADD of each member with its geohash as the score.
pub fn geoadd(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (mut nx, mut xx, mut first) = (false, false, 2);
        while let Some(opt) = a.get(first) {
            if opt.eq_ignore_ascii_case(b"nx") {
                nx = true;
            } else if opt.eq_ignore_ascii_case(b"xx") {
                xx = true;
            } else if !opt.eq_ignore_ascii_case(b"ch") {
                break;
            }
            first += 1;
        }
        let points = &a[first..];
        if !points.len().is_multiple_of(3) || (xx && nx) {
            return Err(syntax_error());
        }
        let mut zadd = Vec::with_capacity(first + points.len() / 3 * 2);
        zadd.push(Bytes::from_static(b"zadd"));
        zadd.extend_from_slice(&a[1..first]);
        for p in points.chunks_exact(3) {
            let [lon, lat] = lon_lat(&p[0], &p[1])?;
            let hash = encode(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX).unwrap_or(Hash::ZERO);
            zadd.push(Bytes::from(align52(hash).to_string()));
            zadd.push(p[2].clone());
        }
        Ok(super::with_slices(&zadd, |a| super::zsets::zadd(ctx, a)))
    })())
}

/// GEOPOS key member [member ...]
pub fn geopos(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let z = read_zset(ctx, &a[1])?;
        Ok(Reply::Array(
            a[2..]
                .iter()
                .map(|m| match z.and_then(|z| z.score(m)) {
                    Some(score) => {
                        let [lon, lat] = decode_score(score);
                        Reply::Array(vec![Reply::HumanDouble(lon), Reply::HumanDouble(lat)])
                    }
                    None => Reply::NilArray,
                })
                .collect(),
        ))
    })())
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
pub fn geodist(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let to_meters = match a.len() {
            4 => 1.0,
            5 => unit(&a[4])?,
            _ => return Err(syntax_error()),
        };
        let Some(z) = read_zset(ctx, &a[1])? else {
            return Ok(Reply::Nil);
        };
        let (Some(s1), Some(s2)) = (z.score(&a[2]), z.score(&a[3])) else {
            return Ok(Reply::Nil);
        };
        let ([x1, y1], [x2, y2]) = (decode_score(s1), decode_score(s2));
        Ok(distance_reply(distance(x1, y1, x2, y2) / to_meters))
    })())
}

/// GEOHASH key member [member ...]: the standard 11-character geohash of each position.
pub fn geohash(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    run((|| {
        let z = read_zset(ctx, &a[1])?;
        Ok(Reply::Array(
            a[2..]
                .iter()
                .map(|m| {
                    let Some(score) = z.and_then(|z| z.score(m)) else {
                        return Reply::Nil;
                    };
                    // Stored hashes use latitudes -85..85; the standard geohash -90..90,
                    // so the position is decoded and encoded again.
                    let [lon, lat] = decode_score(score);
                    let std_lat = Range {
                        min: -90.0,
                        max: 90.0,
                    };
                    let bits = encode(LONG_RANGE, std_lat, lon, lat, 26).map_or(0, |h| h.bits);
                    let text: Vec<u8> = (0..11)
                        .map(|i| {
                            // 52 bits give ten characters; the eleventh is 0, as in Redis.
                            let idx = if i == 10 {
                                0
                            } else {
                                (bits >> (52 - (i + 1) * 5)) & 0x1f
                            };
                            ALPHABET[idx as usize]
                        })
                        .collect();
                    Reply::Bulk(Bytes::from(text))
                })
                .collect(),
        ))
    })())
}

/// Which command a search runs as (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq)]
enum Query {
    /// GEORADIUS: centre given by coordinates; STORE/STOREDIST allowed unless `_RO`.
    Radius { ro: bool },
    /// GEORADIUSBYMEMBER.
    ByMember { ro: bool },
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

impl Query {
    fn stores_allowed(self) -> bool {
        matches!(
            self,
            Query::Radius { ro: false } | Query::ByMember { ro: false }
        )
    }

    fn is_search(self) -> bool {
        matches!(self, Query::Search | Query::SearchStore)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// GEORADIUS, GEORADIUSBYMEMBER, their `_RO` forms, GEOSEARCH and GEOSEARCHSTORE: the
/// arguments checked in Redis's order, the search, and the reply or the stored set.
fn georadius_generic(ctx: &mut Ctx, a: &[Bytes], kind: Query) -> CmdResult<Reply> {
    let src = if kind == Query::SearchStore { 2 } else { 1 };
    let z = read_zset(ctx, &a[src])?;

    let mut centre: Option<[f64; 2]> = None;
    let mut extent: Option<(Extent, f64)> = None;
    let base = match kind {
        Query::Radius { .. } => {
            centre = Some(lon_lat(&a[2], &a[3])?);
            let (r, conversion) = radius(&a[4..6])?;
            extent = Some((Extent::Circle(r), conversion));
            6
        }
        Query::ByMember { .. } => {
            if let Some(z) = z {
                centre = Some(member_position(z, &a[2])?);
                let (r, conversion) = radius(&a[3..5])?;
                extent = Some((Extent::Circle(r), conversion));
            }
            5
        }
        Query::Search => 2,
        Query::SearchStore => 3,
    };
    let mut store: Option<Bytes> = (kind == Query::SearchStore).then(|| a[1].clone());
    let mut storedist = false;
    let (mut withdist, mut withhash, mut withcoords, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let rest = &a[base.min(a.len())..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let arg = rest[i].to_ascii_lowercase();
        let more = remaining - i - 1;
        match &arg[..] {
            b"withdist" => withdist = true,
            b"withhash" => withhash = true,
            b"withcoord" => withcoords = true,
            b"any" => any = true,
            b"asc" => sort = Sort::Asc,
            b"desc" => sort = Sort::Desc,
            b"count" if more >= 1 => {
                count = int(&rest[i + 1])?;
                if count <= 0 {
                    return Err(Reply::err("ERR COUNT must be > 0"));
                }
                i += 1;
            }
            b"store" | b"storedist" if more >= 1 && kind.stores_allowed() => {
                store = Some(rest[i + 1].clone());
                storedist = arg == b"storedist";
                i += 1;
            }
            b"storedist" if kind == Query::SearchStore => storedist = true,
            b"frommember" if more >= 1 && kind.is_search() && !fromloc => {
                if let Some(z) = z {
                    centre = Some(member_position(z, &rest[i + 1])?);
                }
                frommember = true;
                i += 1;
            }
            b"fromlonlat" if more >= 2 && kind.is_search() && !frommember => {
                centre = Some(lon_lat(&rest[i + 1], &rest[i + 2])?);
                fromloc = true;
                i += 2;
            }
            b"byradius" if more >= 2 && kind.is_search() && !bybox => {
                let (r, conversion) = radius(&rest[i + 1..i + 3])?;
                extent = Some((Extent::Circle(r), conversion));
                byradius = true;
                i += 2;
            }
            b"bybox" if more >= 3 && kind.is_search() && !byradius => {
                let (width, height, conversion) = box_size(&rest[i + 1..i + 4])?;
                extent = Some((Extent::Rect { width, height }, conversion));
                bybox = true;
                i += 3;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }

    if store.is_some() && (withdist || withhash || withcoords) {
        let what = if kind == Query::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Reply::err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&a[0]);
    if kind.is_search() && !(frommember || fromloc) {
        return Err(Reply::err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if kind.is_search() && !(byradius || bybox) {
        return Err(Reply::err(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(Reply::err("ERR the ANY argument requires COUNT argument"));
    }

    let (Some(z), Some(xy), Some((extent, conversion))) = (z, centre, extent) else {
        // No source key: an empty answer, or the destination deleted.
        return Ok(match store {
            Some(dest) => Reply::Integer(store_zset(ctx, &dest, Vec::new())),
            None => Reply::Array(Vec::new()),
        });
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = Shape {
        xy,
        conversion,
        extent,
    };
    let limit = if any { count as usize } else { 0 };
    let mut found = search(z, &shape, limit);
    if found.is_empty() && store.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    match sort {
        Sort::None => {}
        Sort::Asc => found.sort_by(|p, q| p.dist.total_cmp(&q.dist)),
        Sort::Desc => found.sort_by(|p, q| q.dist.total_cmp(&p.dist)),
    }
    if count > 0 {
        found.truncate(count as usize);
    }
    for p in &mut found {
        p.dist /= conversion;
    }

    let Some(dest) = store else {
        let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoords);
        return Ok(Reply::Array(
            found
                .into_iter()
                .map(|p| {
                    if options == 0 {
                        return Reply::Bulk(p.member);
                    }
                    let mut item = Vec::with_capacity(options + 1);
                    item.push(Reply::Bulk(p.member));
                    if withdist {
                        item.push(distance_reply(p.dist));
                    }
                    if withhash {
                        item.push(Reply::Integer(p.score as i64));
                    }
                    if withcoords {
                        item.push(Reply::Array(vec![
                            Reply::HumanDouble(p.xy[0]),
                            Reply::HumanDouble(p.xy[1]),
                        ]));
                    }
                    Reply::Array(item)
                })
                .collect(),
        ));
    };
    let items: Vec<(Bytes, f64)> = found
        .into_iter()
        .map(|p| (p.member, if storedist { p.dist } else { p.score }))
        .collect();
    let stored = store_zset(ctx, &dest, items);
    if stored > 0 {
        let event = if kind.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        ctx.notify(ZSET, event, &dest);
    }
    Ok(Reply::Integer(stored))
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
pub fn georadius(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::Radius { ro: false }))
}

/// GEORADIUS_RO: GEORADIUS without STORE.
pub fn georadius_ro(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::Radius { ro: true }))
}

/// GEORADIUSBYMEMBER key member radius unit [options as GEORADIUS]
pub fn georadiusbymember(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::ByMember { ro: false }))
}

/// GEORADIUSBYMEMBER_RO: GEORADIUSBYMEMBER without STORE.
pub fn georadiusbymember_ro(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::ByMember { ro: true }))
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit
/// [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
pub fn geosearch(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::Search))
}

/// GEOSEARCHSTORE destination source ... [STOREDIST]
pub fn geosearchstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(georadius_generic(ctx, a, Query::SearchStore))
}

/// The keys of GEORADIUS and GEORADIUSBYMEMBER: the source, then the STORE / STOREDIST
/// destination when there is one (the last one named, as the parser keeps).
fn radius_keys(a: &[&[u8]]) -> Vec<Bytes> {
    let Some(key) = a.get(1) else {
        return Vec::new();
    };
    let mut keys = vec![Bytes::copy_from_slice(key)];
    let mut store = None;
    for (j, arg) in a.iter().enumerate().skip(2) {
        if arg.eq_ignore_ascii_case(b"store") || arg.eq_ignore_ascii_case(b"storedist") {
            store = a.get(j + 1).copied().or(store);
        }
    }
    keys.extend(store.map(Bytes::copy_from_slice));
    keys
}

use super::flags::{DENYOOM, READONLY, WRITE};
use super::Keys;

/// The GEO family's table rows.
pub static COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("geoadd", -5, WRITE | DENYOOM, 1, 1, 1, geoadd),
    crate::cmd!("geopos", -2, READONLY, 1, 1, 1, geopos),
    crate::cmd!("geodist", -4, READONLY, 1, 1, 1, geodist),
    crate::cmd!("geohash", -2, READONLY, 1, 1, 1, geohash),
    crate::cmd!("georadius", -6, WRITE | DENYOOM, keys: Keys::Parsed { find: radius_keys, first: 1 }, georadius),
    crate::cmd!("georadius_ro", -6, READONLY, 1, 1, 1, georadius_ro),
    crate::cmd!(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM,
        keys: Keys::Parsed { find: radius_keys, first: 1 },
        georadiusbymember
    ),
    crate::cmd!(
        "georadiusbymember_ro",
        -5,
        READONLY,
        1,
        1,
        1,
        georadiusbymember_ro
    ),
    crate::cmd!("geosearch", -7, READONLY, 1, 1, 1, geosearch),
    crate::cmd!(
        "geosearchstore",
        -8,
        WRITE | DENYOOM,
        1,
        2,
        1,
        geosearchstore
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0xdead_beef, 0x1234_5678),
            (u32::MAX, 7),
        ] {
            let i = interleave64(x, y);
            let d = deinterleave64(i);
            assert_eq!((d as u32, (d >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn scores_match_redis() {
        // `GEOADD nyc ...; ZRANGE nyc 0 -1 WITHSCORES` on redis-server 7.0.15 (Redis's
        // own unit/geo "Check geoset values").
        let cases = [
            (-74.0131604, 40.7126674, 1791873972053020u64),
            (-73.9903085, 40.7362513, 1791875485187452),
            (-73.9733487, 40.7648057, 1791875761332224),
            (-73.7858139, 40.6428986, 1791895905559723),
        ];
        for (lon, lat, score) in cases {
            let h = encode(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX).unwrap();
            assert_eq!(align52(h), score);
        }
    }

    #[test]
    fn distances_print_with_four_decimals() {
        assert_eq!(distance_reply(0.775), Reply::Bulk(Bytes::from("0.7750")));
        assert_eq!(distance_reply(0.0), Reply::Bulk(Bytes::from("0.0000")));
        assert_eq!(
            distance_reply(166274.15156960033),
            Reply::Bulk(Bytes::from("166274.1516"))
        );
    }

    #[test]
    fn coordinates_print_as_human_long_doubles() {
        // Redis 7.0.15: GEOADD k 13.361389 38.115556 Palermo; GEOPOS k Palermo.
        let [lon, lat] = decode_score(3479099956230698.0);
        assert_eq!(crate::numbers::format_human(lon), "13.36138933897018433");
        assert_eq!(crate::numbers::format_human(lat), "38.11555639549629859");
        // GEOADD k 0 0 zero: %.17Lf keeps 17 decimals, not 17 significant digits.
        let [lon, _] = decode_score(3377699720527872.0);
        assert_eq!(crate::numbers::format_human(lon), "0.00000268220901489");
        assert_eq!(crate::numbers::format_human(-0.0), "0");
        assert_eq!(crate::numbers::format_human(180.0), "180");
    }
}
