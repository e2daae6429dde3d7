//! Grouped bar charts of the results, drawn with `plotters` into SVG strings (its SVG backend
//! writes text as SVG `<text>`, so no font library is needed).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const COLORS: [RGBColor; 5] = [
    RGBColor(43, 108, 176),
    RGBColor(221, 107, 32),
    RGBColor(113, 128, 150),
    RGBColor(56, 161, 105),
    RGBColor(128, 90, 213),
];

pub struct Chart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub series: Vec<String>,
    /// (group label, one value per series; NaN = no bar)
    pub groups: Vec<(String, Vec<f64>)>,
    pub log_y: bool,
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

/// Bars of `c` as an SVG document.
pub fn render(c: &Chart) -> String {
    let ns = c.series.len().max(1);
    let ng = c.groups.len().max(1);
    let width = (120 + ng * (ns * 26 + 40)).max(520) as u32;
    let mut svg = String::new();
    if let Err(e) = draw(c, ns, ng, width, &mut svg) {
        eprintln!("chart {:?}: {e}", c.title);
    }
    svg
}

/// `e?` for plotters' errors (they borrow the backend), as their text.
macro_rules! t {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

fn draw(c: &Chart, ns: usize, ng: usize, width: u32, out: &mut String) -> Result<(), String> {
    let root = SVGBackend::with_string(out, (width, 460)).into_drawing_area();
    t!(root.fill(&WHITE));
    let values: Vec<f64> =
        c.groups.iter().flat_map(|g| g.1.iter().copied()).filter(|v| v.is_finite() && *v > 0.0).collect();
    let vmax = values.iter().copied().fold(1e-9, f64::max);
    let vmin = values.iter().copied().fold(f64::INFINITY, f64::min).min(vmax);
    let names: Vec<String> = c.groups.iter().map(|g| g.0.clone()).collect();
    let x_fmt = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let bar = 0.8 / ns as f64;
    let title = if c.log_y { format!("{} (log scale)", c.title) } else { c.title.to_string() };
    let mut builder = ChartBuilder::on(&root);
    builder.caption(title, ("sans-serif", 17)).margin(12).x_label_area_size(34).y_label_area_size(64);
    // One chart per axis type: plotters' log and linear ranges are different types.
    macro_rules! bars {
        ($chart:expr) => {{
            let mut chart = $chart;
            t!(chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(ng * 2 + 1)
                .x_label_formatter(&x_fmt)
                .y_desc(c.y_label)
                .y_label_formatter(&|v: &f64| short(*v))
                .draw());
            for si in 0..ns {
                let color = COLORS[si % COLORS.len()];
                let rects = c.groups.iter().enumerate().filter_map(|(gi, g)| {
                    let v = *g.1.get(si)?;
                    if !v.is_finite() || v <= 0.0 {
                        return None;
                    }
                    let x0 = gi as f64 - 0.4 + si as f64 * bar;
                    Some(Rectangle::new(
                        [(x0, if c.log_y { vmin / 2.0 } else { 0.0 }), (x0 + bar * 0.9, v)],
                        color.filled(),
                    ))
                });
                t!(chart.draw_series(rects))
                    .label(c.series.get(si).cloned().unwrap_or_default())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
                let labels = c.groups.iter().enumerate().filter_map(|(gi, g)| {
                    let v = *g.1.get(si)?;
                    (v.is_finite() && v > 0.0).then(|| {
                        let x = gi as f64 - 0.4 + si as f64 * bar + bar * 0.45;
                        let style = TextStyle::from(("sans-serif", 9).into_font())
                            .pos(Pos::new(HPos::Center, VPos::Bottom));
                        Text::new(short(v), (x, v), style)
                    })
                });
                t!(chart.draw_series(labels));
            }
            t!(chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .draw());
        }};
    }
    let x = -0.6..(ng as f64 - 0.4);
    if c.log_y {
        bars!(t!(builder.build_cartesian_2d(x, (vmin / 2.0..vmax * 3.0).log_scale())));
    } else {
        bars!(t!(builder.build_cartesian_2d(x, 0.0..vmax * 1.15)));
    }
    t!(root.present());
    Ok(())
}
