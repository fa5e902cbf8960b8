//! Geohash arithmetic for the geo commands (Redis 7.0's `geohash.c` and
//! `geohash_helper.c`): 52-bit interleaved scores, the nine cells a search
//! reads, and the haversine distance. Step for step as Redis computes them
//! (same constants, same libm calls), so positions, distances and the set
//! of members a search finds are Redis's.

pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

const D_R: f64 = std::f64::consts::PI / 180.0;
const EARTH_RADIUS_IN_METERS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;

/// A geohash of `step` bits per axis.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy, Default)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

#[derive(Clone, Copy, Default)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
        0x0000_0000_FFFF_FFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// The WGS84 ranges Redis can index (Web Mercator's latitude limits).
pub fn coord_ranges() -> (Range, Range) {
    (
        Range {
            min: LONG_MIN,
            max: LONG_MAX,
        },
        Range {
            min: LAT_MIN,
            max: LAT_MAX,
        },
    )
}

/// `geohashEncode`: `None` outside the ranges (or for a bad step).
pub fn encode(
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

pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<Hash> {
    let (lo, la) = coord_ranges();
    encode(lo, la, longitude, latitude, step)
}

/// `geohashDecode`: the cell a hash names.
pub fn decode(long_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
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

/// A sorted-set score as the point it encodes (cell centre, clamped), as
/// `decodeGeohash` (C's double-to-u64 conversion on x86-64 included, so a
/// score that is not a geohash decodes to the same point as in Redis).
pub fn decode_score(score: f64) -> Option<(f64, f64)> {
    let hash = Hash {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    let (lo, la) = coord_ranges();
    let area = decode(lo, la, hash)?;
    let x = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let y = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((x, y))
}

/// `(uint64_t)d` as gcc compiles it for x86-64.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvt = |v: f64| -> u64 {
        // cvttsd2si: the "integer indefinite" value when out of range.
        if v.is_nan() || !(-TWO63..TWO63).contains(&v) {
            1 << 63
        } else {
            v as i64 as u64
        }
    };
    if d < TWO63 {
        cvt(d)
    } else {
        cvt(d - TWO63) ^ (1 << 63)
    }
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2);
    h.bits = x | y;
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// What a search covers: a circle (radius) or a box (width, height),
/// in the unit whose metres are `conversion`, around `xy`.
#[derive(Clone, Copy)]
pub enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy)]
pub struct Search {
    pub xy: (f64, f64),
    pub conversion: f64,
    pub shape: Shape,
}

impl Search {
    /// `geohashBoundingBox`: [min lon, min lat, max lon, max lat].
    fn bounds(&self) -> [f64; 4] {
        let (longitude, latitude) = self.xy;
        let (h, w) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let delta = if latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - delta,
            latitude - lat_delta,
            longitude + delta,
            latitude + lat_delta,
        ]
    }

    /// `geohashCalculateAreasByShapeWGS84`: the centre cell and its eight
    /// neighbours (zero where a neighbour cannot hold a match), in the
    /// order Redis searches them: self, N, S, E, W, NE, NW, SE, SW.
    pub fn cells(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let (longitude, latitude) = self.xy;
        let radius = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps(radius, latitude);
        let (lo, la) = coord_ranges();
        let around = |steps: u8| {
            let hash = encode(lo, la, longitude, latitude, steps).unwrap_or(Hash {
                bits: 0,
                step: steps,
            });
            let area = decode(lo, la, hash).unwrap_or_default();
            (hash, area)
        };
        let (mut hash, mut area) = around(steps);
        let cell = |h: Hash| decode(lo, la, h).unwrap_or_default();
        let decrease = cell(moved(hash, 0, 1)).latitude.max < max_lat
            || cell(moved(hash, 0, -1)).latitude.min > min_lat
            || cell(moved(hash, 1, 0)).longitude.max < max_lon
            || cell(moved(hash, -1, 0)).longitude.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            (hash, area) = around(steps);
        }
        let mut n = [
            hash,
            moved(hash, 0, 1),
            moved(hash, 0, -1),
            moved(hash, 1, 0),
            moved(hash, -1, 0),
            moved(hash, 1, 1),
            moved(hash, -1, 1),
            moved(hash, 1, -1),
            moved(hash, -1, -1),
        ];
        const N: usize = 1;
        const S: usize = 2;
        const E: usize = 3;
        const W: usize = 4;
        const NE: usize = 5;
        const NW: usize = 6;
        const SE: usize = 7;
        const SW: usize = 8;
        if steps >= 2 {
            let mut zero = |cells: [usize; 3]| cells.iter().for_each(|&i| n[i] = Hash::default());
            if area.latitude.min < min_lat {
                zero([S, SW, SE]);
            }
            if area.latitude.max > max_lat {
                zero([N, NE, NW]);
            }
            if area.longitude.min < min_lon {
                zero([W, SW, NW]);
            }
            if area.longitude.max > max_lon {
                zero([E, SE, NE]);
            }
        }
        n
    }

    /// `geoWithinShape`: the point a score encodes and its distance from
    /// the centre (metres), if it lies in the shape.
    pub fn within(&self, score: f64) -> Option<((f64, f64), f64)> {
        let xy = decode_score(score)?;
        let (x1, y1) = self.xy;
        let (x2, y2) = xy;
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(x1, y1, x2, y2);
                (d <= radius * self.conversion).then_some((xy, d))
            }
            Shape::Box { width, height } => {
                let (w, h) = (width * self.conversion, height * self.conversion);
                if lat_distance(y2, y1) > h / 2.0 || distance(x2, y2, x1, y2) > w / 2.0 {
                    return None;
                }
                Some((xy, distance(x1, y1, x2, y2)))
            }
        }
    }
}

fn estimate_steps(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
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

/// The score range [min, max) of the members inside cell `h`.
pub fn score_range(h: Hash) -> (u64, u64) {
    let align = |bits: u64| bits << (52 - u32::from(h.step) * 2);
    (align(h.bits), align(h.bits + 1))
}

/// The 52-bit score of a point.
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    let h = encode_wgs84(longitude, latitude, STEP_MAX)?;
    Some(h.bits << (52 - u32::from(h.step) * 2))
}

fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// Haversine great-circle distance in metres, as Redis computes it.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// GEOHASH's 11-character standard geohash of a score (re-encoded over
/// latitude ±90, the last character always '0' as in Redis).
pub fn standard_geohash(score: f64) -> Option<String> {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (x, y) = decode_score(score)?;
    let hash = encode(
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
        x,
        y,
        26,
    )
    .map_or(0, |h| h.bits);
    Some(
        (0..11)
            .map(|i| {
                let idx = if i == 10 {
                    0
                } else {
                    ((hash >> (52 - (i + 1) * 5)) & 0x1f) as usize
                };
                ALPHABET[idx] as char
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for (a, b) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (123_456, 654_321),
        ] {
            let d = deinterleave64(interleave64(a, b));
            assert_eq!((d as u32, (d >> 32) as u32), (a, b));
        }
    }

    #[test]
    fn palermo_as_redis_documents_it() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo": score 3479099956230698,
        // GEOHASH "sqc8b49rny0", GEODIST to Catania 166274.1516 m.
        let s = score_of(13.361389, 38.115556).unwrap();
        assert_eq!(s, 3_479_099_956_230_698);
        assert_eq!(standard_geohash(s as f64).unwrap(), "sqc8b49rny0");
        let c = score_of(15.087269, 37.502669).unwrap();
        let (p, q) = (
            decode_score(s as f64).unwrap(),
            decode_score(c as f64).unwrap(),
        );
        let d = distance(p.0, p.1, q.0, q.1);
        assert!((d - 166_274.151_6).abs() < 0.001, "{d}");
    }
}
