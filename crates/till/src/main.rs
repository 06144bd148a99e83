//! `till`: the tilldb command. Today: `till probe`, what a disk is and what each flush costs,
//! and `till bench log`, what the write-ahead log makes of it under load.

mod bench;
mod check;
mod crashtest;
mod probe;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "till",
    version,
    about = "Probe disks, benchmark, crash-test and check tilldb databases"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// What is this disk, what does each flush method cost, is its cache lying?
    Probe(probe::ProbeArgs),
    /// Recover a database and check every tree and every page checksum.
    Check(check::CheckArgs),
    /// Kill a committing process at random moments and check that nothing acknowledged is
    /// lost and nothing is half applied.
    Crashtest(crashtest::CrashtestArgs),
    /// Benchmarks: how fast each layer commits, measured against the disk.
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe::run(&args),
        Command::Crashtest(args) => crashtest::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Bench { command } => bench::run(&command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("till: {e}");
            ExitCode::FAILURE
        }
    }
}
