//! Output of `till bench seed` and `till bench block-size`: what a run measured (one
//! [`MethodRaw`] per flush method and block size, one [`SeedRow`] per database), the human
//! report and the SVG plot.
//!
//! The JSON document (`--json`) and its keys are in `seed_json.rs`, which reads these types;
//! `seed.rs` hands both to `emit` in `lib.rs`.

use super::bars::{self, Bar, BarChart};
use super::log_report::Row;
use super::machine::Setting;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use std::path::Path;
use tilldb::io::Measurement;
use tilldb::{Durability, FlushMethod};

/// The ratio of `Sync` commits/s to raw flushes/s this project aims for.
const SYNC_TARGET: f64 = 0.85;

/// One flush method's raw rate, or why the device refused it.
#[derive(Debug)]
pub struct MethodRaw {
    pub method: FlushMethod,
    /// 0 when the device refused the method before a block size was chosen.
    pub block_bytes: u32,
    pub raw: Result<Measurement, String>,
}

/// One (method, block size, durability) database's 500 commits.
#[derive(Debug)]
pub struct SeedRow {
    pub method: FlushMethod,
    pub block_bytes: u32,
    pub durability: Durability,
    pub raw_flushes_per_sec: f64,
    pub row: Row,
}

impl SeedRow {
    pub fn ratio_to_raw(&self) -> f64 {
        if self.raw_flushes_per_sec > 0.0 {
            self.row.commits_per_sec() / self.raw_flushes_per_sec
        } else {
            0.0
        }
    }
}

/// What a run prints: its rows, and the flags that shaped them.
#[derive(Debug)]
pub struct Report<'a> {
    /// `--commits`, `--value-bytes`, `--sync-latency-us` (0: off).
    pub commits: u64,
    pub value_bytes: usize,
    pub sync_latency_us: u64,
    /// Whether `--block-bytes` named more than one size (the plot's labels then name it).
    pub several_blocks: bool,
    pub dir: &'a Path,
    pub setting: &'a Setting,
    pub raws: &'a [MethodRaw],
    pub rows: &'a [SeedRow],
}

impl Report<'_> {
    /// The SVG: one bar per row (method, block size, durability), the method's raw rate
    /// marked on it.
    pub fn plot(&self) -> String {
        let blocks = self.several_blocks;
        let bars: Vec<Bar> = self
            .rows
            .iter()
            .map(|s| Bar {
                label: if blocks {
                    format!("{} / {} B / {}", s.method, s.block_bytes, s.durability)
                } else {
                    format!("{} / {}", s.method, s.durability)
                },
                value: s.row.commits_per_sec(),
                reference: (s.raw_flushes_per_sec > 0.0).then_some(s.raw_flushes_per_sec),
            })
            .collect();
        let latency = match self.sync_latency_us {
            0 => String::new(),
            us => format!(", SIMULATED flush latency {us} us"),
        };
        let title = format!(
            "{} x (insert one row, commit), one client{latency}",
            self.commits
        );
        let subtitle = format!(
            "{} · {} B values · fresh database per row",
            self.setting.short(),
            self.value_bytes
        );
        bars::render(&BarChart {
            title: &title,
            subtitle: &subtitle,
            value_label: "commits/s",
            reference_label: "raw flushed writes/s of the method",
            bars: &bars,
        })
    }

    pub fn print(&self) {
        println!(
            "One client, {} x (insert one row, commit), per flush method and durability",
            self.commits
        );
        let [machine, disk] = self.setting.rows();
        println!("  {:<18} {}", machine.0, machine.1);
        println!("  {:<18} {}", "dir", self.dir.display());
        println!("  {:<18} {}", disk.0, disk.1);
        println!(
            "  {:<18} 15 B key, {} B value, fresh database each",
            "row", self.value_bytes
        );
        if self.sync_latency_us > 0 {
            println!(
                "\n!! Every number below includes a SIMULATED flush latency of {} us.",
                self.sync_latency_us
            );
        }
        println!();
        println!("{}", self.table());
        for m in self.raws {
            if let Err(why) = &m.raw {
                if m.block_bytes > 0 {
                    println!("{}, {} B blocks: skipped: {why}", m.method, m.block_bytes);
                } else {
                    println!("{}: skipped: {why}", m.method);
                }
            }
        }
        println!(
            "raw/s = one writer's flushed log-block writes with that method, measured in this \
             run; x raw = commits/s / raw/s (target for sync: >= {SYNC_TARGET})."
        );
        let sync: Vec<&SeedRow> = self
            .rows
            .iter()
            .filter(|r| r.durability == Durability::Sync)
            .collect();
        if let Some(worst) = sync
            .iter()
            .min_by(|a, b| a.ratio_to_raw().total_cmp(&b.ratio_to_raw()))
        {
            println!(
                "sync: lowest x raw {:.2} ({}, {} B blocks); {} of {} rows at or above {SYNC_TARGET}.",
                worst.ratio_to_raw(),
                worst.method,
                worst.block_bytes,
                sync.iter()
                    .filter(|r| r.ratio_to_raw() >= SYNC_TARGET)
                    .count(),
                sync.len()
            );
        }
    }

    fn table(&self) -> Table {
        let mut table = Table::new();
        table.load_style(UTF8_FULL_CONDENSED);
        table.set_header([
            "flush method",
            "block B",
            "durability",
            "seconds",
            "commits/s",
            "raw/s",
            "x raw",
            "flushes",
            "log B/commit",
            "p50 us",
            "p99 us",
            "max us",
        ]);
        for s in self.rows {
            let r = &s.row;
            table.add_row([
                s.method.to_string(),
                s.block_bytes.to_string(),
                s.durability.to_string(),
                format!("{:.3}", r.elapsed.as_secs_f64()),
                format!("{:.0}", r.commits_per_sec()),
                format!("{:.0}", s.raw_flushes_per_sec),
                format!("{:.2}", s.ratio_to_raw()),
                r.flushes.to_string(),
                format!("{:.0}", r.log_bytes_per_commit()),
                format!("{:.1}", r.p50_us),
                format!("{:.1}", r.p99_us),
                format!("{:.1}", r.max_us),
            ]);
        }
        for i in 3..12 {
            if let Some(column) = table.column_mut(i) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        table
    }
}
