//! Reproducible randomness for the load generator: SplitMix64 (fast, good
//! enough for picking keys and operations) and the Zipfian generator of
//! Gray et al., "Quickly generating billion-record synthetic databases"
//! (SIGMOD'94), as YCSB uses it.

/// One step of SplitMix64: a well-mixed function of `state`.
pub fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: splitmix64(seed),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.state)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (bias < n / 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How keys are picked from `0..keys`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform,
    /// Zipfian with exponent `theta` in (0, 1): key 0 is the most popular,
    /// then key 1, and so on (no scrambling).
    Zipf {
        theta: f64,
    },
}

impl Distribution {
    /// Parses `uniform`, `zipf` (theta 0.99, YCSB's) or `zipf:THETA`.
    pub fn parse(text: &str) -> Result<Distribution, String> {
        match text.split_once(':') {
            None if text == "uniform" => Ok(Distribution::Uniform),
            None if text == "zipf" => Ok(Distribution::Zipf { theta: 0.99 }),
            Some(("zipf", theta)) => match theta.parse::<f64>() {
                Ok(t) if t > 0.0 && t < 1.0 => Ok(Distribution::Zipf { theta: t }),
                _ => Err(format!("zipf theta must be in (0, 1), not {theta:?}")),
            },
            _ => Err(format!(
                "unknown distribution {text:?} (uniform, zipf or zipf:THETA)"
            )),
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipf { theta } => write!(f, "zipf:{theta}"),
        }
    }
}

/// Draws keys from `0..keys` under a [`Distribution`]; cheap to copy (the
/// Zipf constants are computed once, in O(keys)).
#[derive(Debug, Clone, Copy)]
pub struct KeyPicker {
    keys: u64,
    zipf: Option<Zipf>,
}

#[derive(Debug, Clone, Copy)]
struct Zipf {
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
}

impl KeyPicker {
    pub fn new(keys: u64, distribution: Distribution) -> KeyPicker {
        assert!(keys > 0, "an empty key space");
        let zipf = match distribution {
            Distribution::Uniform => None,
            Distribution::Zipf { theta } => {
                let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
                let zetan = zeta(keys);
                let zeta2 = zeta(2.min(keys));
                let n = keys as f64;
                Some(Zipf {
                    theta,
                    zetan,
                    alpha: 1.0 / (1.0 - theta),
                    eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
                })
            }
        };
        KeyPicker { keys, zipf }
    }

    pub fn pick(&self, rng: &mut Rng) -> u64 {
        let Some(z) = self.zipf else {
            return rng.below(self.keys);
        };
        let u = rng.unit();
        let uz = u * z.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(z.theta) {
            return 1.min(self.keys - 1);
        }
        let rank = (self.keys as f64 * (z.eta * u - z.eta + 1.0).powf(z.alpha)) as u64;
        rank.min(self.keys - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_distributions() {
        assert_eq!(Distribution::parse("uniform"), Ok(Distribution::Uniform));
        assert_eq!(
            Distribution::parse("zipf"),
            Ok(Distribution::Zipf { theta: 0.99 })
        );
        assert_eq!(
            Distribution::parse("zipf:0.5"),
            Ok(Distribution::Zipf { theta: 0.5 })
        );
        for bad in ["zipf:1", "zipf:0", "zipf:x", "gauss", "uniform:1"] {
            assert!(Distribution::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uniform_covers_the_key_space() {
        let picker = KeyPicker::new(10, Distribution::Uniform);
        let mut rng = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[picker.pick(&mut rng) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let keys = 1000;
        let picker = KeyPicker::new(keys, Distribution::Zipf { theta: 0.99 });
        let mut rng = Rng::new(7);
        let mut counts = vec![0u32; keys as usize];
        let draws = 200_000;
        for _ in 0..draws {
            counts[picker.pick(&mut rng) as usize] += 1;
        }
        // Key 0's share is 1/zeta(1000, 0.99), about 13 %.
        let share0 = f64::from(counts[0]) / f64::from(draws);
        assert!((0.11..0.15).contains(&share0), "{share0}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
        let top10: u32 = counts[..10].iter().sum();
        assert!(f64::from(top10) / f64::from(draws) > 0.3);
        let one = KeyPicker::new(1, Distribution::Zipf { theta: 0.5 });
        assert_eq!(one.pick(&mut rng), 0);
    }
}
