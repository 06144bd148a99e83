//! A hand-written SVG horizontal bar chart (`--plot` of `bench seed`, `block-size` and
//! `torn`): one bar per row, its label on the left and its value at its end, and on each
//! bar an optional reference mark (the raw flush rate the row is compared with).
//!
//! ```text
//!                      title
//!                    subtitle
//!              ▇ commits/s   ┆ raw flushed writes      <- legend
//!   fdatasync/sync  ▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇┆ 9.6k
//!   dsync/sync      ▇▇▇▇▇▇▇▇▇┆  5.1k
//!                  0 ───┬─────┬─────┬──
//!                      value label
//! ```

use super::svg::{
    self, AXIS_STYLE, GRID_STYLE, REFERENCE_STYLE, line, linear_axis, scale, text, tick_label, w,
};

const WIDTH: f64 = 860.0;
const PLOT_LEFT: f64 = 250.0;
const PLOT_RIGHT: f64 = WIDTH - 70.0;
const PLOT_TOP: f64 = 96.0;
/// Height of one bar's row, and of the bar in it.
const ROW: f64 = 26.0;
const BAR: f64 = 17.0;
/// Most bars one chart draws; more is a runaway caller.
const BARS_MAX: usize = 256;
const BAR_FILL: &str = "fill=\"#1f5fa8\"";

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// The reference this bar is compared with, drawn across it.
    pub reference: Option<f64>,
}

/// What to draw.
#[derive(Debug)]
pub struct BarChart<'a> {
    pub title: &'a str,
    pub subtitle: &'a str,
    /// Label of the value axis, and of the bars in the legend.
    pub value_label: &'a str,
    /// Legend label of the reference marks, when any bar has one.
    pub reference_label: &'a str,
    pub bars: &'a [Bar],
}

/// The legend.
fn legend(out: &mut String, chart: &BarChart<'_>) {
    let mid = WIDTH / 2.0;
    let legend_y = 74.0;
    w(
        out,
        format_args!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"24\" height=\"12\" {BAR_FILL}/>\n",
            PLOT_LEFT,
            legend_y - 6.0
        ),
    );
    text(
        out,
        (PLOT_LEFT + 32.0, legend_y + 4.0),
        "start",
        12,
        "",
        chart.value_label,
    );
    let any_reference = chart.bars.iter().any(|b| b.reference.is_some());
    if any_reference {
        let x = mid + 60.0;
        line(
            out,
            (x, legend_y - 8.0),
            (x, legend_y + 8.0),
            REFERENCE_STYLE,
        );
        text(
            out,
            (x + 10.0, legend_y + 4.0),
            "start",
            12,
            "",
            chart.reference_label,
        );
    }
}

/// The SVG document.
pub fn render(chart: &BarChart<'_>) -> String {
    assert!(chart.bars.len() <= BARS_MAX, "{} bars", chart.bars.len());
    #[expect(clippy::cast_precision_loss, reason = "at most BARS_MAX bars")]
    let rows = chart.bars.len().max(1) as f64;
    let plot_bottom = PLOT_TOP + rows * ROW;
    let height = plot_bottom + 62.0;
    let mut svg = svg::start(WIDTH, height, chart.title, chart.subtitle);
    let out = &mut svg;
    legend(out, chart);
    let max = chart
        .bars
        .iter()
        .flat_map(|b| std::iter::once(b.value).chain(b.reference))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let axis = linear_axis(max * 1.04);
    let x_px = |v: f64| {
        scale(
            v.clamp(0.0, axis.top),
            (0.0, axis.top),
            (PLOT_LEFT, PLOT_RIGHT),
        )
    };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small positive count: linear_axis gives a handful of ticks"
    )]
    let ticks = (axis.top / axis.step).round() as u32;
    assert!(ticks <= 24, "too many ticks: {ticks}");
    for i in 0..=ticks {
        let v = f64::from(i) * axis.step;
        let x = x_px(v);
        line(out, (x, PLOT_TOP), (x, plot_bottom), GRID_STYLE);
        line(out, (x, plot_bottom), (x, plot_bottom + 5.0), AXIS_STYLE);
        text(
            out,
            (x, plot_bottom + 20.0),
            "middle",
            12,
            "",
            &tick_label(v),
        );
    }
    line(
        out,
        (PLOT_LEFT, plot_bottom),
        (PLOT_RIGHT, plot_bottom),
        AXIS_STYLE,
    );
    line(
        out,
        (PLOT_LEFT, PLOT_TOP),
        (PLOT_LEFT, plot_bottom),
        AXIS_STYLE,
    );
    text(
        out,
        (f64::midpoint(PLOT_LEFT, PLOT_RIGHT), height - 18.0),
        "middle",
        13,
        "",
        chart.value_label,
    );
    draw_bars(out, chart.bars, &x_px);
    svg.push_str("</svg>\n");
    svg
}

/// Each bar with its label, its value and its reference mark.
fn draw_bars(out: &mut String, bars: &[Bar], x_px: &dyn Fn(f64) -> f64) {
    for (i, bar) in bars.iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "at most BARS_MAX bars")]
        let top = PLOT_TOP + i as f64 * ROW + (ROW - BAR) / 2.0;
        let value = if bar.value.is_finite() {
            bar.value.max(0.0)
        } else {
            0.0
        };
        let end = x_px(value);
        text(
            out,
            (PLOT_LEFT - 8.0, top + BAR - 4.0),
            "end",
            12,
            "",
            &bar.label,
        );
        w(
            out,
            format_args!(
                "<rect x=\"{PLOT_LEFT:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{BAR}\" \
                 {BAR_FILL}/>\n",
                (end - PLOT_LEFT).max(0.0)
            ),
        );
        text(
            out,
            (end + 5.0, top + BAR - 4.0),
            "start",
            11,
            "fill=\"#444\"",
            &tick_label(value.round()),
        );
        if let Some(r) = bar.reference.filter(|r| r.is_finite()) {
            let x = x_px(r);
            line(out, (x, top - 3.0), (x, top + BAR + 3.0), REFERENCE_STYLE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_bar_per_row_with_labels_values_and_references() {
        let bars = [
            Bar {
                label: "fdatasync <sync>".into(),
                value: 9600.0,
                reference: Some(10_900.0),
            },
            Bar {
                label: "dsync".into(),
                value: 5100.0,
                reference: None,
            },
        ];
        let svg = render(&BarChart {
            title: "t",
            subtitle: "s",
            value_label: "commits/s",
            reference_label: "raw",
            bars: &bars,
        });
        assert!(svg.starts_with("<svg"));
        assert_eq!(
            svg.matches("<rect").count(),
            1 + 1 + 2,
            "background, legend, bars"
        );
        assert!(svg.contains("fdatasync &lt;sync&gt;"));
        assert!(svg.contains(">9.6k<"));
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            1 + 1,
            "legend + one mark"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn no_bars_and_bad_values_still_draw() {
        let svg = render(&BarChart {
            title: "t",
            subtitle: "s",
            value_label: "v",
            reference_label: "r",
            bars: &[Bar {
                label: "nan".into(),
                value: f64::NAN,
                reference: Some(f64::INFINITY),
            }],
        });
        assert!(svg.contains(">0<"));
        let empty = render(&BarChart {
            title: "t",
            subtitle: "s",
            value_label: "v",
            reference_label: "r",
            bars: &[],
        });
        assert!(empty.trim_end().ends_with("</svg>"));
    }
}
