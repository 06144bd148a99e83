//! The plot of `till bench peers`: commits/s against threads, one line per engine, and the
//! raw flushed-write rate as a dashed line. `svg.rs` draws one series; this file draws
//! several on its axes and primitives, the legend in a column right of the plot.
//!
//! ```text
//!            title
//!          subtitle
//!   y ┤            o-----o        ── tilldb
//!     ┤ - - - - -o- - - - - -     ── sqlite-wal
//!     ┤      x----x-----x         ...
//!   0 ┼────┬────┬────┬──          - - raw
//!          1    4   16   64
//! ```

use super::engines;
use super::report::PeersRun;
use crate::svg::{
    self, Frame, draw_x_axis, draw_y_axis, line, linear_axis, log2_domain, scale, text, tick_label,
    w,
};

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 520.0;
const PLOT_LEFT: f64 = 86.0;
const PLOT_RIGHT: f64 = 740.0;
const PLOT_TOP: f64 = 80.0;
const PLOT_BOTTOM: f64 = HEIGHT - 62.0;
const LEGEND_LEFT: f64 = PLOT_RIGHT + 24.0;
/// Share of the plot width left free at each end of the x axis, so points clear the y axis.
const X_PAD: f64 = 0.04;
/// One color per engine, in `Engine` order (tilldb first, the strongest).
const COLORS: [&str; 7] = [
    "#1f5fa8", "#e67e22", "#8e44ad", "#27ae60", "#c0392b", "#b8860b", "#7f8c8d",
];
const REFERENCE_STYLE: &str = "stroke=\"#555\" stroke-width=\"1.4\" stroke-dasharray=\"7 5\"";

/// One engine's line.
struct Series {
    label: &'static str,
    color: &'static str,
    points: Vec<(f64, f64)>,
}

/// The chart as a standalone SVG document.
pub fn render(run: &PeersRun) -> String {
    let series: Vec<Series> = run
        .engines
        .iter()
        .map(|&engine| {
            #[expect(clippy::cast_precision_loss, reason = "thread counts are at most 4096")]
            let mut points: Vec<(f64, f64)> = run
                .rows
                .iter()
                .filter(|r| r.engine == engine)
                .map(|r| (r.threads as f64, r.commits_per_sec()))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label: engines::name(engine),
                color: COLORS[engine as usize % COLORS.len()],
                points,
            }
        })
        .collect();
    let raw = run.raw.flushes_per_sec;
    let title = format!(
        "Durable one-insert commits/s: tilldb ({}, Sync) and its peers",
        run.flush_method
    );
    let subtitle = format!(
        "{} · {} B values · {:.2} s per engine and thread count · one run",
        run.setting.short(),
        run.value_bytes,
        run.seconds
    );
    let mut out = svg::start(WIDTH, HEIGHT, &title, &subtitle);
    let points = series.iter().flat_map(|s| s.points.iter());
    let y_max = points.clone().map(|p| p.1).fold(raw, f64::max);
    let y_axis = linear_axis(y_max * 1.04);
    let y_px = |v: f64| scale(v, (0.0, y_axis.top), (PLOT_BOTTOM, PLOT_TOP));
    let x_min = points.clone().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = points.map(|p| p.0).fold(0.0, f64::max);
    let (lo, hi) = if x_max > 0.0 {
        log2_domain(x_min, x_max)
    } else {
        (0, 1)
    };
    let pad = X_PAD * (PLOT_RIGHT - PLOT_LEFT);
    let x_px = |x: f64| {
        let pixels = (PLOT_LEFT + pad, PLOT_RIGHT - pad);
        scale(x.log2(), (f64::from(lo), f64::from(hi)), pixels)
    };
    let frame = Frame {
        left: PLOT_LEFT,
        right: PLOT_RIGHT,
        top: PLOT_TOP,
        bottom: PLOT_BOTTOM,
        height: HEIGHT,
    };
    draw_y_axis(&mut out, frame, "commits/s", y_axis, &y_px);
    draw_x_axis(&mut out, frame, "threads (log2 scale)", (lo, hi), &x_px);
    line(
        &mut out,
        (PLOT_LEFT, y_px(raw)),
        (PLOT_RIGHT, y_px(raw)),
        REFERENCE_STYLE,
    );
    for s in &series {
        draw_series(&mut out, s, &x_px, &y_px);
    }
    draw_legend(&mut out, &series, raw);
    out.push_str("</svg>\n");
    out
}

fn draw_series(out: &mut String, s: &Series, x_px: &dyn Fn(f64) -> f64, y_px: &dyn Fn(f64) -> f64) {
    let style = format!("stroke=\"{}\" stroke-width=\"2.2\"", s.color);
    let list: Vec<String> = s
        .points
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", x_px(x), y_px(y)))
        .collect();
    w(
        out,
        format_args!(
            "<polyline points=\"{}\" fill=\"none\" {style} stroke-linejoin=\"round\"/>\n",
            list.join(" ")
        ),
    );
    for &(x, y) in &s.points {
        w(
            out,
            format_args!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.4\" fill=\"white\" {style}/>\n",
                x_px(x),
                y_px(y)
            ),
        );
    }
}

/// One legend line per engine, each with its highest rate, then the raw reference.
fn draw_legend(out: &mut String, series: &[Series], raw: f64) {
    let mut y = PLOT_TOP + 8.0;
    for s in series {
        let style = format!("stroke=\"{}\" stroke-width=\"2.2\"", s.color);
        line(out, (LEGEND_LEFT, y), (LEGEND_LEFT + 26.0, y), &style);
        let best = s.points.iter().map(|p| p.1).fold(0.0, f64::max);
        let label = format!("{} (max {})", s.label, tick_label(best.round()));
        text(out, (LEGEND_LEFT + 34.0, y + 4.0), "start", 12, "", &label);
        y += 22.0;
    }
    line(
        out,
        (LEGEND_LEFT, y),
        (LEGEND_LEFT + 26.0, y),
        REFERENCE_STYLE,
    );
    let label = format!("raw flushes, 1 writer ({})", tick_label(raw.round()));
    text(out, (LEGEND_LEFT + 34.0, y + 4.0), "start", 12, "", &label);
}
