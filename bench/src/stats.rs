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

/// p50, p99, max and mean of `v` (any unit, >= 0).
pub fn dist(v: Vec<f64>) -> Dist {
    let nan = Dist { count: 0, p50: f64::NAN, p99: f64::NAN, max: f64::NAN, mean: f64::NAN };
    let Ok(mut h) = Histogram::<u64>::new(3) else { return nan };
    for x in &v {
        let _ = h.record((x.max(0.0) * SCALE).round() as u64);
    }
    if h.is_empty() {
        return nan;
    }
    Dist {
        count: v.len(),
        p50: h.value_at_quantile(0.50) as f64 / SCALE,
        p99: h.value_at_quantile(0.99) as f64 / SCALE,
        max: h.max() as f64 / SCALE,
        mean: h.mean() / SCALE,
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
