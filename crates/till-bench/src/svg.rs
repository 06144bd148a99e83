//! A hand-written SVG line chart: one series on a log2 x axis against a linear y axis from 0,
//! plus an optional dashed horizontal reference line. No plotting crate; text names the
//! viewer's sans-serif (`--plot FILE.png` renders this SVG with a built-in font: `png.rs`).
//!
//! ```text
//!            title
//!          subtitle
//!      ── series   - - reference          <- legend
//!   y ┤                 o-----o
//!     ┤ - - - - - - -o- - - - - - - -      <- reference (dashed)
//!     ┤      o----o
//!   0 ┼────┬────┬────┬────┬──
//!          1    2    4    8   x (log2)
//! ```

use std::fmt::Write as _;

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 500.0;
const PLOT_LEFT: f64 = 86.0;
const PLOT_RIGHT: f64 = WIDTH - 30.0;
const PLOT_TOP: f64 = 96.0;
const PLOT_BOTTOM: f64 = HEIGHT - 62.0;
const FRAME: Frame = Frame {
    left: PLOT_LEFT,
    right: PLOT_RIGHT,
    top: PLOT_TOP,
    bottom: PLOT_BOTTOM,
    height: HEIGHT,
};

/// Where a chart's plot area lies in its document, for the axis helpers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    /// The document's height (the x axis label sits near its bottom).
    pub height: f64,
}
/// Share of the plot width left free at each end of the x axis, so points clear the y axis.
const X_PAD: f64 = 0.04;
/// Aim for about this many y ticks.
const Y_TICKS_TARGET: f64 = 6.0;

/// What to draw.
#[derive(Debug)]
pub struct Chart<'a> {
    pub title: &'a str,
    pub subtitle: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series_label: &'a str,
    /// Points in x order; every x is positive (the x axis is log2).
    pub points: &'a [(f64, f64)],
    /// A dashed horizontal line at this y, with its legend label.
    pub reference: Option<(f64, &'a str)>,
}

/// The y axis: 0 to `top` in ticks of `step`, both "nice" (1, 2 or 5 times a power of ten).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearAxis {
    pub top: f64,
    pub step: f64,
}

/// A y axis from 0 that holds `max`, with about [`Y_TICKS_TARGET`] nice ticks.
///
/// Worked example: max 7141 → raw step 1190 → nice step 2000 → top 8000.
pub fn linear_axis(max: f64) -> LinearAxis {
    if !(max.is_finite() && max > 0.0) {
        return LinearAxis {
            top: 1.0,
            step: 0.2,
        };
    }
    let raw = max / Y_TICKS_TARGET;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    let top = (max / step).ceil() * step;
    assert!(top >= max * (1.0 - 1e-9), "axis top {top} below max {max}");
    LinearAxis { top, step }
}

/// The x domain in log2 units: whole powers of two around `[min, max]`, at least one wide.
///
/// Worked example: threads 1..256 → (0, 8); threads 3..3 → (1, 2).
pub fn log2_domain(min: f64, max: f64) -> (i32, i32) {
    assert!(min > 0.0 && min <= max, "log2 domain needs 0 < min <= max");
    #[expect(
        clippy::cast_possible_truncation,
        reason = "log2 of a finite positive f64 is within ±1100"
    )]
    let (mut lo, hi) = (min.log2().floor() as i32, max.log2().ceil() as i32);
    if lo == hi {
        lo -= 1;
    }
    (lo, hi)
}

/// Maps `v` from `[from_lo, from_hi]` onto `[to_lo, to_hi]` linearly.
pub fn scale(v: f64, (from_lo, from_hi): (f64, f64), (to_lo, to_hi): (f64, f64)) -> f64 {
    assert!(from_hi > from_lo, "empty domain");
    to_lo + (v - from_lo) / (from_hi - from_lo) * (to_hi - to_lo)
}

/// A tick label: 0, 250, 2.5k, 40k, 1.2M.
pub fn tick_label(v: f64) -> String {
    let (value, suffix) = if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart as a standalone SVG document.
pub fn render(chart: &Chart<'_>) -> String {
    let mut svg = start(WIDTH, HEIGHT, chart.title, chart.subtitle);
    let out = &mut svg;
    header(out, chart);
    let y_max = chart.points.iter().map(|p| p.1);
    let y_max = y_max
        .chain(chart.reference.map(|r| r.0))
        .fold(0.0, f64::max);
    let y_axis = linear_axis(y_max * 1.04);
    let y_px = |v: f64| scale(v, (0.0, y_axis.top), (PLOT_BOTTOM, PLOT_TOP));
    draw_y_axis(out, FRAME, chart.y_label, y_axis, &y_px);
    let x_min = chart
        .points
        .iter()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min);
    let x_max = chart.points.iter().map(|p| p.0).fold(0.0, f64::max);
    let (lo, hi) = if chart.points.is_empty() {
        (0, 1)
    } else {
        log2_domain(x_min, x_max)
    };
    let pad = X_PAD * (PLOT_RIGHT - PLOT_LEFT);
    let x_px = |x: f64| {
        let pixels = (PLOT_LEFT + pad, PLOT_RIGHT - pad);
        scale(x.log2(), (f64::from(lo), f64::from(hi)), pixels)
    };
    draw_x_axis(out, FRAME, chart.x_label, (lo, hi), &x_px);
    if let Some((y, _)) = chart.reference {
        let y = y_px(y);
        line(out, (PLOT_LEFT, y), (PLOT_RIGHT, y), REFERENCE_STYLE);
    }
    let pixels: Vec<(f64, f64)> = chart
        .points
        .iter()
        .map(|&(x, y)| (x_px(x), y_px(y)))
        .collect();
    let list: Vec<String> = pixels
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    w(
        out,
        format_args!(
            "<polyline points=\"{}\" fill=\"none\" {SERIES_STYLE} stroke-linejoin=\"round\"/>\n",
            list.join(" ")
        ),
    );
    for (&(x, y), &(_, value)) in pixels.iter().zip(chart.points) {
        marker(out, (x, y));
        let value = tick_label(value.round());
        text(out, (x, y - 9.0), "middle", 10, "fill=\"#444\"", &value);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Stroke of the series line and its markers.
const SERIES_STYLE: &str = "stroke=\"#1f5fa8\" stroke-width=\"2.2\"";
/// Stroke of the dashed reference line.
pub(super) const REFERENCE_STYLE: &str =
    "stroke=\"#c0392b\" stroke-width=\"1.5\" stroke-dasharray=\"7 5\"";
pub(super) const AXIS_STYLE: &str = "stroke=\"#333\"";
pub(super) const GRID_STYLE: &str = "stroke=\"#e8e8e8\"";

/// Appends formatted text; writing to a `String` cannot fail.
pub(super) fn w(out: &mut String, args: std::fmt::Arguments<'_>) {
    out.write_fmt(args)
        .expect("writing to a String cannot fail");
}

pub(super) fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
    w(
        out,
        format_args!(
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" {style}/>\n"
        ),
    );
}

/// Text anchored `start`, `middle` or `end` at `(x, y)`; `content` is escaped here.
pub(super) fn text(
    out: &mut String,
    (x, y): (f64, f64),
    anchor: &str,
    size: u32,
    extra: &str,
    content: &str,
) {
    w(
        out,
        format_args!(
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\" \
             {extra}>{}</text>\n",
            escape(content)
        ),
    );
}

fn marker(out: &mut String, (x, y): (f64, f64)) {
    w(
        out,
        format_args!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.6\" fill=\"white\" {SERIES_STYLE}/>\n"
        ),
    );
}

/// The opening of an SVG document of `width` x `height` on a white background, with the
/// title and subtitle centred at its top: what every plot of `till bench` starts with.
pub(super) fn start(width: f64, height: f64, title: &str, subtitle: &str) -> String {
    let mut out = String::with_capacity(16384);
    w(
        &mut out,
        format_args!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        ),
    );
    let mid = width / 2.0;
    text(
        &mut out,
        (mid, 26.0),
        "middle",
        16,
        "font-weight=\"bold\"",
        title,
    );
    text(
        &mut out,
        (mid, 47.0),
        "middle",
        12,
        "fill=\"#555\"",
        subtitle,
    );
    out
}

/// The legend.
fn header(out: &mut String, chart: &Chart<'_>) {
    let y = 74.0;
    let x = PLOT_LEFT + 10.0;
    line(out, (x, y), (x + 28.0, y), SERIES_STYLE);
    marker(out, (x + 14.0, y));
    text(
        out,
        (x + 36.0, y + 4.0),
        "start",
        12,
        "",
        chart.series_label,
    );
    if let Some((_, label)) = chart.reference {
        let x = WIDTH / 2.0 + 20.0;
        line(out, (x, y), (x + 28.0, y), REFERENCE_STYLE);
        text(out, (x + 36.0, y + 4.0), "start", 12, "", label);
    }
}

/// Horizontal grid lines, tick labels and the rotated axis label.
pub(super) fn draw_y_axis(
    out: &mut String,
    f: Frame,
    label: &str,
    axis: LinearAxis,
    y_px: &dyn Fn(f64) -> f64,
) {
    // Bounded: `top / step` is about Y_TICKS_TARGET by construction of the axis.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small positive count, asserted below"
    )]
    let ticks = (axis.top / axis.step).round() as u32;
    assert!(
        f64::from(ticks) <= 2.0 * Y_TICKS_TARGET,
        "too many y ticks: {ticks}"
    );
    for i in 0..=ticks {
        let v = f64::from(i) * axis.step;
        let y = y_px(v);
        line(out, (f.left, y), (f.right, y), GRID_STYLE);
        line(out, (f.left - 5.0, y), (f.left, y), AXIS_STYLE);
        text(out, (f.left - 8.0, y + 4.0), "end", 12, "", &tick_label(v));
    }
    line(out, (f.left, f.top), (f.left, f.bottom), AXIS_STYLE);
    let mid = f64::midpoint(f.top, f.bottom);
    let rotate = format!("transform=\"rotate(-90 22 {mid})\"");
    text(out, (22.0, mid), "middle", 13, &rotate, label);
}

/// Ticks at each power of two in the domain, vertical grid lines and the axis label.
pub(super) fn draw_x_axis(
    out: &mut String,
    f: Frame,
    label: &str,
    (lo, hi): (i32, i32),
    x_px: &dyn Fn(f64) -> f64,
) {
    assert!(hi - lo <= 64, "x domain too wide: 2^{lo}..2^{hi}");
    for k in lo..=hi {
        let v = 2f64.powi(k);
        let x = x_px(v);
        line(out, (x, f.top), (x, f.bottom), GRID_STYLE);
        line(out, (x, f.bottom), (x, f.bottom + 5.0), AXIS_STYLE);
        text(out, (x, f.bottom + 20.0), "middle", 12, "", &tick_label(v));
    }
    line(out, (f.left, f.bottom), (f.right, f.bottom), AXIS_STYLE);
    let mid = f64::midpoint(f.left, f.right);
    text(out, (mid, f.height - 18.0), "middle", 13, "", label);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_axis_picks_nice_steps_that_cover_the_max() {
        assert_eq!(
            linear_axis(7141.0),
            LinearAxis {
                top: 8000.0,
                step: 2000.0
            }
        );
        assert_eq!(
            linear_axis(100.0),
            LinearAxis {
                top: 100.0,
                step: 20.0
            }
        );
        assert_eq!(
            linear_axis(0.0),
            LinearAxis {
                top: 1.0,
                step: 0.2
            }
        );
        for max in [0.3, 1.0, 9.9, 123.0, 499.0, 12_345.0, 2.5e6] {
            let a = linear_axis(max);
            assert!(a.top >= max, "{max}: {a:?}");
            let ticks = a.top / a.step;
            assert!((3.0..=12.0).contains(&ticks), "{max}: {a:?}");
        }
    }

    #[test]
    fn log2_domain_spans_whole_powers_and_is_never_empty() {
        assert_eq!(log2_domain(1.0, 256.0), (0, 8));
        assert_eq!(log2_domain(3.0, 100.0), (1, 7));
        assert_eq!(log2_domain(1.0, 1.0), (-1, 0));
        assert_eq!(log2_domain(3.0, 3.0), (1, 2));
    }

    #[test]
    fn scale_maps_ends_and_inverts_for_screen_y() {
        assert!((scale(0.0, (0.0, 10.0), (100.0, 0.0)) - 100.0).abs() < 1e-9);
        assert!((scale(10.0, (0.0, 10.0), (100.0, 0.0))).abs() < 1e-9);
        assert!((scale(2.5, (0.0, 10.0), (0.0, 200.0)) - 50.0).abs() < 1e-9);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(250.0), "250");
        assert_eq!(tick_label(2500.0), "2.5k");
        assert_eq!(tick_label(40_000.0), "40k");
        assert_eq!(tick_label(1_200_000.0), "1.2M");
        assert_eq!(tick_label(0.2), "0.2");
    }

    #[test]
    fn renders_points_reference_and_escaped_text() {
        let svg = render(&Chart {
            title: "a <b> & c",
            subtitle: "s",
            x_label: "threads",
            y_label: "commits/s",
            series_label: "commits/s",
            points: &[(1.0, 10.0), (2.0, 20.0), (4.0, 35.0)],
            reference: Some((30.0, "raw")),
        });
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("<polyline points=\""));
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        assert_eq!(
            svg.matches("<circle").count(),
            3 + 1,
            "points plus the legend marker"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
