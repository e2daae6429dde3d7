//! Percentiles (hdrhistogram, 3 significant digits) and fairness.

use hdrhistogram::Histogram;
use serde::Serialize;

#[derive(Serialize, Clone, Debug, Default)]
pub struct Dist {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Samples are recorded in thousandths of their unit (a ms sample keeps µs resolution).
const SCALE: f64 = 1000.0;

/// p50, p99, max and mean of `v` (any unit; negative samples, such as a grant that arrived
/// before the releaser's own reply, are kept: the histogram counts from the smallest sample).
pub fn dist(v: Vec<f64>) -> Dist {
    let nan = Dist { count: 0, p50: f64::NAN, p99: f64::NAN, max: f64::NAN, mean: f64::NAN };
    let Ok(mut h) = Histogram::<u64>::new(3) else { return nan };
    let base = v.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::min);
    for x in v.iter().filter(|x| x.is_finite()) {
        let _ = h.record(((x - base) * SCALE).round() as u64);
    }
    if h.is_empty() {
        return nan;
    }
    let at = |raw: u64| raw as f64 / SCALE + base;
    Dist {
        count: v.len(),
        p50: at(h.value_at_quantile(0.50)),
        p99: at(h.value_at_quantile(0.99)),
        max: at(h.max()),
        mean: v.iter().filter(|x| x.is_finite()).sum::<f64>() / h.len() as f64,
    }
}

/// Jain's fairness index (Σx)² / (n·Σx²): 1 = perfectly even, 1/n = one client got everything.
pub fn jain(x: &[u64]) -> f64 {
    let n = x.len() as f64;
    let s: f64 = x.iter().map(|&v| v as f64).sum();
    let s2: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    if s2 == 0.0 {
        return f64::NAN;
    }
    s * s / (n * s2)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Human-friendly number: 1234567 -> "1 234 567", 12.345 -> "12.3".
pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        return "n/a".into();
    }
    if v.abs() >= 1000.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(' ');
            }
            out.push(ch);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 0.002 * b.abs().max(1.0)
    }

    #[test]
    fn percentiles_of_positive_samples() {
        let d = dist((1..=1000).map(f64::from).collect());
        assert_eq!(d.count, 1000);
        assert!(close(d.p50, 500.0), "{d:?}");
        assert!(close(d.p99, 990.0), "{d:?}");
        assert!(close(d.max, 1000.0), "{d:?}");
        assert!(close(d.mean, 500.5), "{d:?}");
    }

    #[test]
    fn negative_samples_are_kept() {
        let d = dist(vec![-20.0, -10.0, -5.0, 3.0, 40.0]);
        assert!(close(d.p50, -5.0), "{d:?}");
        assert!(close(d.max, 40.0), "{d:?}");
        assert!(close(d.mean, 1.6), "{d:?}");
        let all_negative = dist(vec![-3.0, -2.0, -1.0]);
        assert!(close(all_negative.max, -1.0), "{all_negative:?}");
    }

    #[test]
    fn empty_is_nan() {
        assert!(dist(Vec::new()).p50.is_nan());
    }

    #[test]
    fn jain_index_bounds() {
        assert!(close(jain(&[5, 5, 5, 5]), 1.0));
        assert!(close(jain(&[8, 0, 0, 0]), 0.25));
    }
}
