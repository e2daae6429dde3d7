//! Percentiles (nearest rank over all samples, no histogram approximation) and fairness.

use serde::Serialize;

#[derive(Serialize, Clone, Debug, Default)]
pub struct Dist {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn dist(mut v: Vec<f64>) -> Dist {
    if v.is_empty() {
        return Dist { count: 0, p50: f64::NAN, p99: f64::NAN, max: f64::NAN, mean: f64::NAN };
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Dist {
        count: v.len(),
        p50: percentile(&v, 50.0),
        p99: percentile(&v, 99.0),
        max: *v.last().unwrap(),
        mean: v.iter().sum::<f64>() / v.len() as f64,
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
