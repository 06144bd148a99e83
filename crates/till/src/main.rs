//! `till`: the tilldb command. `till probe`: what a disk is and what each flush costs;
//! `till bench`: what the log and the store make of it under load; `till crashtest`: kill a
//! committing process and check nothing acknowledged is lost; `till check`: recover a database
//! and check its log, pages, trees and free space; `till dump-log` and `till stats`: show a
//! database's log and facts without changing anything. `till diskcheck`: prove with a power
//! cut and a second machine whether the disk keeps what each flush method acknowledged.
//! `till tables`, `get`, `scan`, `export` and `import`: the rows themselves (`data/`).

mod acks;
/// For the unit tests that include `tests/common/postgres.rs` (the year-long shipping test):
/// its `skip_missing`, as `tests/common` has it. Unix only: the test ships into a
/// PostgreSQL it starts with Debian's tools (not run under Wine).
#[cfg(all(test, unix))]
mod common {
    /// A check that needs what this machine lacks: skipped here, a failure under CI (which
    /// installs everything the tests need). Recorded in `target/tmp/skipped.txt`, which
    /// `scripts/test` prints.
    pub fn skip_missing(test: &str, reason: &str) {
        use std::io::Write;
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
            "{test} cannot run under CI: {reason} (.ci/run must provide it)"
        );
        let line = format!("SKIPPED {test}: {reason}");
        eprintln!("{line}");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp/skipped.txt");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}
mod backup;
mod check;
mod compact;
mod crashtest;
mod data;
mod demo;
mod diskcheck;
mod dump_log;
mod encrypt;
mod inspect;
mod key;
mod platform;
#[cfg(all(test, unix))]
#[path = "../tests/common/postgres.rs"]
mod postgres_server;
mod probe;
mod progress;
mod rotate_key;
mod ship;
mod stats;

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
    /// The application's key of an encrypted database, for any command that opens one: a
    /// file of the key's 32 bytes, or of 64 hexadecimal digits [default: the file
    /// `TILLDB_KEY_FILE` names, else the digits in `TILLDB_KEY`].
    #[arg(long, global = true, value_name = "FILE")]
    key_file: Option<std::path::PathBuf>,
    /// The application's key kept by Windows (DPAPI) for this user or for any process on this
    /// machine, instead of a key file: what `till encrypt`, `till rotate-key --new-key-dpapi`
    /// or a program with `OsKeyStore` wrapped the database's data key with.
    #[arg(
        long,
        global = true,
        value_name = "SCOPE",
        value_enum,
        conflicts_with = "key_file"
    )]
    key_dpapi: Option<key::DpapiScope>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// What is this disk, what does each flush method cost, is its cache lying?
    Probe(probe::ProbeArgs),
    /// Check a database: its log chain, then recovery, every tree, free-space accounting and
    /// every page checksum.
    ///
    /// Shows its progress on standard error when that is a terminal.
    Check(check::CheckArgs),
    /// Print a database's write-ahead log, record by record, without changing anything.
    DumpLog(dump_log::DumpLogArgs),
    /// Print what a database holds (header, files, log, pages, tables) without changing
    /// anything.
    ///
    /// Shows its progress on standard error when that is a terminal.
    Stats(stats::StatsArgs),
    /// Kill a committing process at random moments and check that nothing acknowledged is
    /// lost and nothing is half applied.
    Crashtest(crashtest::CrashtestArgs),
    /// Copy a database consistently, then check the copy (restoring is opening the copy).
    ///
    /// Shows its progress on standard error when that is a terminal.
    Backup(backup::BackupArgs),
    /// Give back the space a database no longer uses: a compacted copy, checked, swapped in
    /// its place (the database must not be open elsewhere).
    ///
    /// Shows its progress on standard error when that is a terminal.
    Compact(compact::CompactArgs),
    /// Replace an encrypted database's key: its data key is wrapped by the new key in one
    /// header rewrite (two crash-safe writes), nothing else rewritten; then it opens with the
    /// new key only (the database must not be open elsewhere).
    RotateKey(rotate_key::RotateKeyArgs),
    /// Turn a plain database into an encrypted one: an encrypted copy under the key given
    /// (--key-file, `TILLDB_KEY_FILE`, `TILLDB_KEY`), checked, swapped in its place (the database
    /// must not be open elsewhere).
    ///
    /// Shows its progress on standard error when that is a terminal.
    Encrypt(encrypt::EncryptArgs),
    /// Ship a database's committed transactions to PostgreSQL, exactly once (needs
    /// `Options::change_feed`).
    Ship(ship::ShipArgs),
    /// A point-of-sale load on a database with the change feed on (for `till ship`).
    Demo(demo::DemoArgs),
    /// Does "committed" survive a real power cut? A listener on a second machine records what
    /// the writer was told is durable; verify compares after the reboot.
    Diskcheck {
        #[command(subcommand)]
        command: diskcheck::DiskcheckCommand,
    },
    /// List every table and its rows.
    Tables(data::TablesArgs),
    /// Print the value of one key (a missing key is an error, exit status 1).
    Get(data::GetArgs),
    /// Print the rows of a table in key order, `key<TAB>value` a line (or JSONL): all, a
    /// prefix or a range, forward or reversed.
    Scan(data::ScanArgs),
    /// Write every row of one table, or of every table, as JSONL or CSV.
    ///
    /// Shows its progress on standard error when that is a terminal and the rows go to a
    /// file (--output) or a pipe.
    Export(data::ExportArgs),
    /// Put the rows of a JSONL or CSV file into a database: in one transaction (all or
    /// nothing), or committed every --batch rows.
    ///
    /// Shows its progress on standard error when that is a terminal and the file is over
    /// 8 MiB.
    Import(data::ImportArgs),
    /// Benchmarks: how fast each layer commits, measured against the disk.
    Bench {
        #[command(subcommand)]
        command: till_bench::BenchCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The reports printed line by line, often into `head` or `less` (the rows' commands
    // handle a closed pipe themselves, `data/output.rs`); not the commands that talk over
    // sockets (`ship`, `diskcheck`), whose peer going away is an error to handle, not a
    // signal to die of.
    if matches!(
        cli.command,
        Command::Check(_) | Command::Stats(_) | Command::DumpLog(_)
    ) {
        platform::default_sigpipe();
    }
    key::set_key_source(cli.key_file, cli.key_dpapi);
    let result = match cli.command {
        Command::Probe(args) => probe::run(&args),
        Command::Crashtest(args) => crashtest::run(&args),
        Command::Check(args) => check::run(&args),
        Command::DumpLog(args) => dump_log::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Diskcheck { command } => diskcheck::run(&command),
        // `till ship`'s exit status says which failure it was (docs/feed.md).
        Command::Ship(args) => return ship::main(&args),
        Command::Backup(args) => backup::run(&args),
        Command::Compact(args) => compact::run(&args),
        Command::RotateKey(args) => rotate_key::run(&args),
        Command::Encrypt(args) => encrypt::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Tables(args) => data::tables(&args),
        Command::Get(args) => data::get(&args),
        Command::Scan(args) => data::scan(&args),
        Command::Export(args) => data::export(&args),
        Command::Import(args) => data::import(&args),
        Command::Bench { command } => till_bench::run(&command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("till: {e}");
            ExitCode::FAILURE
        }
    }
}
