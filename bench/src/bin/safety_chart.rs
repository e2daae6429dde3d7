//! safety-chart: the safety suite's results as one SVG of three heat maps (lost updates,
//! overlapping holders, stale writes accepted), one row per strategy and workload, one column
//! per fault, the count written in each cell (green 0, red otherwise, grey: not run).
//!
//!   cargo run --release --manifest-path bench/Cargo.toml --bin safety_chart -- \
//!       target/safety/results.json target/safety/safety.svg

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

#[derive(Deserialize)]
struct Results {
    server: String,
    date: String,
    runs: Vec<Run>,
}

#[derive(Deserialize)]
struct Run {
    strategy: String,
    fault: String,
    workload: String,
    lost_updates: u64,
    overlapping_holders: u64,
    stale_writes_accepted: u64,
}

const PANELS: [&str; 3] = ["lost updates", "overlapping holders", "stale writes accepted"];
const CELL_W: i32 = 116;
const CELL_H: i32 = 24;
const LABEL_W: i32 = 210;
const HEAD_H: i32 = 70;

fn value(run: &Run, panel: usize) -> Option<u64> {
    match panel {
        0 if run.workload != "mutex" => Some(run.lost_updates),
        1 => Some(run.overlapping_holders),
        2 if run.workload != "mutex" => Some(run.stale_writes_accepted),
        _ => None,
    }
}

fn first_seen(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn color(v: Option<u64>, max: u64) -> RGBColor {
    match v {
        None => RGBColor(226, 226, 226),
        Some(0) => RGBColor(167, 217, 167),
        Some(n) => {
            // light to dark red on a log scale of the panel's largest count
            let f = ((n as f64).ln_1p() / (max.max(1) as f64).ln_1p()).clamp(0.0, 1.0);
            RGBColor(250 - (70.0 * f) as u8, 180 - (150.0 * f) as u8, 170 - (140.0 * f) as u8)
        }
    }
}

fn draw(results: &Results, out: &mut String) -> Result<(), String> {
    let rows = first_seen(results.runs.iter().map(|r| format!("{} / {}", r.strategy, r.workload)));
    let faults = first_seen(results.runs.iter().map(|r| r.fault.clone()));
    let panel_w = CELL_W * faults.len() as i32 + 24;
    let width = LABEL_W + panel_w * PANELS.len() as i32 + 10;
    let height = HEAD_H + CELL_H * rows.len() as i32 + 40;
    let root = SVGBackend::with_string(out, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let text = |s: &str, size: u32, x: i32, y: i32, h: HPos| {
        let style = TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, VPos::Center));
        Text::new(s.to_string(), (x, y), style)
    };
    let title = format!("redis-lock safety suite: redis-server {}, {}", results.server, results.date);
    root.draw(&text(&title, 16, 10, 14, HPos::Left)).map_err(|e| e.to_string())?;
    for (ri, row) in rows.iter().enumerate() {
        let y = HEAD_H + CELL_H * ri as i32 + CELL_H / 2;
        root.draw(&text(row, 12, LABEL_W - 8, y, HPos::Right)).map_err(|e| e.to_string())?;
    }
    for (pi, panel) in PANELS.iter().enumerate() {
        let x0 = LABEL_W + panel_w * pi as i32;
        let max = results.runs.iter().filter_map(|r| value(r, pi)).max().unwrap_or(0);
        root.draw(&text(panel, 14, x0 + CELL_W * faults.len() as i32 / 2, 38, HPos::Center))
            .map_err(|e| e.to_string())?;
        for (fi, fault) in faults.iter().enumerate() {
            let x = x0 + CELL_W * fi as i32;
            root.draw(&text(fault, 9, x + CELL_W / 2, HEAD_H - 10, HPos::Center))
                .map_err(|e| e.to_string())?;
            for (ri, row) in rows.iter().enumerate() {
                let run = results
                    .runs
                    .iter()
                    .find(|r| &r.fault == fault && &format!("{} / {}", r.strategy, r.workload) == row);
                let v = run.and_then(|r| value(r, pi));
                let y = HEAD_H + CELL_H * ri as i32;
                root.draw(&Rectangle::new(
                    [(x + 1, y + 1), (x + CELL_W - 1, y + CELL_H - 1)],
                    color(v, max).filled(),
                ))
                .map_err(|e| e.to_string())?;
                let label = v.map_or_else(|| "-".to_string(), |n| n.to_string());
                root.draw(&text(&label, 12, x + CELL_W / 2, y + CELL_H / 2, HPos::Center))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    let note = "counts per cell; lost updates and stale writes only for workloads with a resource (lock-set, guarded)";
    root.draw(&text(note, 11, 10, height - 16, HPos::Left)).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = match args.as_slice() {
        [_, i, o] => (i.clone(), o.clone()),
        _ => {
            eprintln!("usage: safety_chart <results.json> <chart.svg>");
            std::process::exit(2);
        }
    };
    let results: Results = match std::fs::read_to_string(&input)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{input}: {e}");
            std::process::exit(1);
        }
    };
    let mut svg = String::new();
    if let Err(e) = draw(&results, &mut svg) {
        eprintln!("drawing failed: {e}");
        std::process::exit(1);
    }
    if let Err(e) = std::fs::write(&output, svg) {
        eprintln!("{output}: {e}");
        std::process::exit(1);
    }
    println!("wrote {output}");
}
