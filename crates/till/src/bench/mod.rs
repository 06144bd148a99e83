//! `till bench`: benchmarks of tilldb's layers, each reproducible from its flags alone.
//!
//! - `till bench log` (`log.rs`): the write-ahead log alone, commits/s against threads,
//!   compared with the device's raw flushed-write rate.
//!
//! `log_load.rs` runs the committer threads, `log_report.rs` prints and plots the rows.
//!
//! Shared pieces: `latency.rs` (percentiles over merged per-thread samples), `scratch.rs`
//! (a fresh run directory removed afterwards), `slow_storage.rs` (a SIMULATED flush latency,
//! serialized like one disk), `svg.rs` (hand-written line charts).

mod latency;
mod log;
mod log_load;
mod log_report;
mod scratch;
mod slow_storage;
mod svg;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The write-ahead log alone: commits/s, flushes and latency against thread count.
    Log(log::LogArgs),
}

pub fn run(command: &BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        BenchCommand::Log(args) => log::run(args),
    }
}
