//! `till diskcheck`: does "committed" survive a real power cut on this machine?
//!
//! A second machine runs `listen` and records, durably, every acknowledgement the writer
//! (`run`, on the machine under test) is given by its flush method; the power of the machine
//! under test is cut while it writes; after the reboot `verify` compares what survived with
//! that record. The procedure, and what a verdict means, is docs/diskcheck.md.
//!
//! - `wire.rs`: the protocol and the listener's record format;
//! - `listen.rs`: the listener;
//! - `run.rs`: the writer, `raw` (blocks of `block.rs`) or `db` (tilldb commits);
//! - `verify.rs`: the comparison and the verdicts.

mod block;
mod listen;
mod run;
mod verify;
mod wire;

#[cfg(test)]
mod tests;

use clap::{Args, Subcommand};
use comfy_table::Table;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tilldb::io::{FileStorage, Storage};
use tilldb::{Durability, FlushMethod, Options};
use wire::Mode;

#[derive(Subcommand, Debug)]
pub enum DiskcheckCommand {
    /// On a second machine (one that keeps its power): record every acknowledgement writers
    /// send, durably, per run.
    Listen(ListenArgs),
    /// On the machine under test: write, send each acknowledgement to the listener, and wait
    /// for the power to be cut.
    Run(RunArgs),
    /// After the reboot: compare what survived with what the listener recorded.
    Verify(VerifyArgs),
}

#[derive(Args, Debug)]
pub struct ListenArgs {
    /// Port to listen on (0: any free port, printed).
    #[arg(long, default_value_t = wire::DEFAULT_PORT)]
    port: u16,
    /// Where the records are kept.
    #[arg(long, default_value = "diskcheck-records")]
    dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The listener, HOST:PORT.
    #[arg(long)]
    to: String,
    /// The directory to write in, on the disk under test.
    dir: PathBuf,
    /// `raw`: each method's own write (and flush) of checksummed blocks in place; `db`: tilldb
    /// commits.
    #[arg(long, value_enum, default_value = "raw")]
    mode: Mode,
    /// Flush method to test (repeatable; default: every durable method this platform has).
    #[arg(long = "method")]
    methods: Vec<FlushMethod>,
    /// `db` mode: durability of each commit (sync, buffered or lazy).
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// Stop after this many seconds (default: write until the power goes).
    #[arg(long)]
    seconds: Option<f64>,
    /// Stop after this many writes per method (default: write until the power goes).
    #[arg(long)]
    writes: Option<u64>,
    /// Seconds of writing before the prompt to cut the power.
    #[arg(long, default_value_t = 10.0)]
    warmup_seconds: f64,
    /// `raw` mode: MiB per method's file (rewritten lap after lap).
    #[arg(long, default_value_t = 16)]
    file_mib: u64,
    /// Remove an earlier run's files from DIR first.
    #[arg(long)]
    replace: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The listener that recorded the run, HOST:PORT.
    #[arg(long)]
    from: String,
    /// The run's directory, as given to `till diskcheck run`.
    dir: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(command: &DiskcheckCommand) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        DiskcheckCommand::Listen(args) => listen(args),
        DiskcheckCommand::Run(args) => write(args),
        DiskcheckCommand::Verify(args) => check(args),
    }
}

fn listen(args: &ListenArgs) -> Result<(), Box<dyn std::error::Error>> {
    let listener = listen::Listener::start(&format!("{}:{}", args.bind, args.port), &args.dir)?;
    println!(
        "till diskcheck listen: listening on {}, recording in {}",
        listener.addr(),
        args.dir.display()
    );
    listener.wait();
    Ok(())
}

fn write(args: &RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.seconds.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
        return Err("--seconds must be a positive number".into());
    }
    if args.file_mib == 0 {
        return Err("--file-mib must be at least 1".into());
    }
    if args.replace {
        remove_earlier_run(&args.dir)?;
    }
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
    let plan = run::Plan {
        run: run::new_run_id(),
        mode: args.mode,
        methods: if args.methods.is_empty() {
            FlushMethod::available()
        } else {
            args.methods.clone()
        },
        methods_explicit: !args.methods.is_empty(),
        durability: args.durability,
        file_bytes: args.file_mib << 20,
        db_options: Options::default(),
        listener: args.to.clone(),
    };
    let (run_file, notes) = run::prepare(&storage, &args.dir, &plan)?;
    for note in notes {
        println!("note: {note}");
    }
    println!(
        "run {} in {}: {} stream(s): {}; acknowledgements go to {}",
        run_file.run,
        args.dir.display(),
        run_file.streams.len(),
        run_file
            .streams
            .iter()
            .map(|s| s.stream.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        args.to
    );
    let stop = match (args.seconds, args.writes) {
        (Some(_), Some(_)) => return Err("give --seconds or --writes, not both".into()),
        (Some(s), None) => run::Stop::After(Duration::from_secs_f64(s)),
        (None, Some(n)) => run::Stop::Writes(n),
        (None, None) => run::Stop::Never,
    };
    let warmup = Duration::from_secs_f64(args.warmup_seconds.max(0.0));
    let mut prompted = false;
    let mut report = |elapsed: Duration, progress: &[run::Progress]| {
        let counts: Vec<String> = progress
            .iter()
            .map(|p| format!("{} {}", p.stream, p.recorded))
            .collect();
        println!(
            "{:>6.0} s  recorded by the listener: {}",
            elapsed.as_secs_f64(),
            counts.join("  ")
        );
        if !prompted && elapsed >= warmup && progress.iter().all(|p| p.recorded > 0) {
            prompted = true;
            println!(
                "\n>>> CUT THE POWER NOW: pull the plug (not a shutdown, not the power button). \
                 <<<\n>>> After the reboot: till diskcheck verify --from {} {} <<<\n",
                args.to,
                args.dir.display()
            );
        }
    };
    let outcome = run::write_streams(&storage, &args.dir, &run_file, &plan, stop, &mut report)?;
    for p in &outcome.progress {
        println!(
            "{}: {} writes acknowledged by the method, {} recorded by the listener",
            p.stream, p.written, p.recorded
        );
    }
    if outcome.errors.is_empty() {
        println!(
            "stopped without a power cut; `till diskcheck verify --from {} {}` checks this run \
             all the same",
            args.to,
            args.dir.display()
        );
        Ok(())
    } else {
        Err(format!(
            "the run stopped: {}; only what the listener recorded counts",
            outcome.errors.join("; ")
        )
        .into())
    }
}

/// `--replace`: the files of an earlier run in `dir`, and nothing else, removed.
fn remove_earlier_run(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name == run::RUN_FILE
            || name.starts_with("raw-")
            || (name.starts_with("db-") && entry.path().is_dir());
        if ours {
            if entry.path().is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

fn check(args: &VerifyArgs) -> Result<(), Box<dyn std::error::Error>> {
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
    let run_file = run::read_run_file(&*storage, &args.dir)?;
    let records = verify::fetch(&args.from, &run_file.run)?;
    let reports = verify::verify(
        &storage,
        &args.dir,
        &run_file,
        &records,
        &Options::default(),
    )?;
    let verdicts = verify::verdicts(&reports);
    let violations: u64 = reports.iter().map(verify::StreamReport::violations).sum();
    if args.json {
        let out = json!({
            "run": run_file.run,
            "mode": run_file.mode,
            "dir": args.dir.display().to_string(),
            "listener": args.from,
            "streams": reports,
            "violations": violations,
            "verdicts": verdicts,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "run {} ({} mode) in {}, against the listener at {}",
            run_file.run,
            run_file.mode.name(),
            args.dir.display(),
            args.from
        );
        let mut table = Table::new();
        table.set_header([
            "stream",
            "acknowledged",
            "checked",
            "present",
            "lost",
            "torn",
            "corrupt",
            "first lost",
        ]);
        for r in &reports {
            let lost = if r.unflushed_by_design() {
                format!("{} (unflushed)", r.lost)
            } else if r.lost_within_window > 0 {
                format!("{} (+{} allowed)", r.lost, r.lost_within_window)
            } else {
                r.lost.to_string()
            };
            table.add_row([
                r.stream.clone(),
                r.acknowledged.to_string(),
                r.checked.to_string(),
                r.present.to_string(),
                lost,
                r.torn.to_string(),
                r.corrupt.to_string(),
                r.first_lost
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
        println!("{table}");
        for r in &reports {
            for note in &r.notes {
                println!("{}: {note}", r.stream);
            }
        }
        for line in &verdicts {
            println!("{line}");
        }
    }
    if violations > 0 {
        return Err(format!("{violations} acknowledged writes lost or damaged").into());
    }
    Ok(())
}
