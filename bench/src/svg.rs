//! Grouped bar charts written as plain SVG (no font or plotting library needed: the text is SVG
//! `<text>`, laid out by the viewer).

use std::fmt::Write;

const COLORS: [&str; 5] = ["#2b6cb0", "#dd6b20", "#718096", "#38a169", "#805ad5"];

pub struct Chart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub series: Vec<String>,
    /// (group label, one value per series; NaN = no bar)
    pub groups: Vec<(String, Vec<f64>)>,
    pub log_y: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

pub fn render(c: &Chart) -> String {
    let (ml, mr, mt, mb) = (80.0, 20.0, 60.0, 70.0);
    let ns = c.series.len().max(1) as f64;
    let bar_w = 22.0;
    let group_w = ns * bar_w + 30.0;
    let plot_w = (group_w * c.groups.len() as f64).max(300.0);
    let plot_h = 320.0;
    let w = ml + plot_w + mr;
    // legend layout: wrap items into rows that fit the width
    let mut legend = Vec::new();
    let (mut lx, mut row) = (ml, 0usize);
    for name in &c.series {
        let item_w = 28.0 + 7.0 * name.chars().count() as f64;
        if lx + item_w > w - mr && lx > ml {
            lx = ml;
            row += 1;
        }
        legend.push((lx, row));
        lx += item_w;
    }
    let h = mt + plot_h + mb + 18.0 * row as f64;
    let vals: Vec<f64> =
        c.groups.iter().flat_map(|g| g.1.iter().copied()).filter(|v| v.is_finite() && *v > 0.0).collect();
    let vmax = vals.iter().cloned().fold(0.0, f64::max).max(1e-9);
    let vmin_pos = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    // y mapping
    let (lo, hi) = if c.log_y {
        let lo = vmin_pos.min(vmax).log10().floor().min(vmax.log10().floor());
        (lo, vmax.log10().ceil().max(lo + 1.0))
    } else {
        (0.0, nice_ceil(vmax))
    };
    let y_of = |v: f64| -> f64 {
        let t = if c.log_y { (v.max(10f64.powf(lo)).log10() - lo) / (hi - lo) } else { (v - lo) / (hi - lo) };
        mt + plot_h - t.clamp(0.0, 1.0) * plot_h
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        w / 2.0,
        esc(c.title)
    );
    // grid + ticks
    let ticks: Vec<f64> = if c.log_y {
        (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| lo + (hi - lo) * i as f64 / 5.0).collect()
    };
    for t in ticks {
        let y = y_of(t);
        let _ = write!(
            s,
            r##"<line x1="{ml}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e2e8f0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + plot_w,
            ml - 6.0,
            y + 4.0,
            short(t)
        );
    }
    let _ = write!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        mt + plot_h / 2.0,
        mt + plot_h / 2.0,
        esc(c.y_label)
    );
    let _ = write!(
        s,
        r#"<line x1="{ml}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        mt + plot_h,
        ml + plot_w,
        mt + plot_h
    );
    // bars
    for (gi, (label, values)) in c.groups.iter().enumerate() {
        let gx = ml + gi as f64 * group_w + 15.0;
        for (si, v) in values.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            let x = gx + si as f64 * bar_w;
            let y = y_of(*v);
            let base = mt + plot_h;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                bar_w - 3.0,
                (base - y).max(0.0),
                COLORS[si % COLORS.len()],
                esc(&c.series[si]),
                short(*v)
            );
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                x + (bar_w - 3.0) / 2.0,
                y - 3.0,
                short(*v)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
            gx + ns * bar_w / 2.0,
            mt + plot_h + 16.0,
            esc(label)
        );
    }
    // legend
    for (si, name) in c.series.iter().enumerate() {
        let (lx, row) = legend[si];
        let ly = mt + plot_h + 48.0 + 18.0 * row as f64;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 10.0,
            COLORS[si % COLORS.len()],
            lx + 16.0,
            ly,
            esc(name)
        );
    }
    if c.log_y {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="42" text-anchor="middle" font-size="10">(log scale)</text>"#,
            w / 2.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn nice_ceil(v: f64) -> f64 {
    let e = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if m * e >= v {
            return m * e;
        }
    }
    10.0 * e
}
