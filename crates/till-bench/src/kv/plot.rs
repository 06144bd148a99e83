//! The plot of `till bench kv`: one horizontal bar per row and engine, each engine's figure
//! as a percentage of the row's best (100 = the best engine; for the length and the sizes,
//! where lower is better, the best's value over the engine's). `bars.rs` draws it.

use super::engines;
use super::report::{KvRun, Status};
use crate::bars::{self, Bar, BarChart};

/// The chart as a standalone SVG document.
pub fn render(run: &KvRun) -> String {
    let mut bars = Vec::new();
    for &workload in &run.workloads {
        let best = run.best(workload).map(|(_, v)| v);
        for e in &run.engines {
            let Some(o) = e.results.iter().find(|o| o.workload == workload) else {
                continue;
            };
            let score = match (o.value, best) {
                (Some(v), Some(b)) if v > 0.0 && b > 0.0 => {
                    if workload.higher_is_better() {
                        100.0 * v / b
                    } else {
                        100.0 * b / v
                    }
                }
                _ => 0.0,
            };
            let mark = match o.status {
                Status::Ok => "",
                Status::Chunked => " (chunked)",
                Status::Failed => " (failed)",
            };
            bars.push(Bar {
                label: format!(
                    "{} · {}{mark}",
                    short_label(&workload.name()),
                    engines::name(e.engine)
                ),
                value: score,
                reference: None,
            });
        }
    }
    let subtitle = format!(
        "{} · N = {} rows of 24 B keys and 150 B values · cache {} MiB · one run",
        run.setting.short(),
        run.rows,
        run.cache_bytes >> 20
    );
    bars::render(&BarChart {
        title: "till bench kv: each engine as a % of the row's best (100 = best)",
        subtitle: &subtitle,
        value_label: "% of the row's best engine (rates: value / best; ms and sizes: best / value)",
        reference_label: "",
        bars: &bars,
    })
}

/// The row's JSON name, shortened to fit the label column.
fn short_label(name: &str) -> String {
    name.replace("_compaction", "").replace('_', " ")
}
