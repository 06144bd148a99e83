//! `till bench peers`: tilldb's insert+commit workload next to the stores a user would pick
//! instead, in one process, one run and one directory, every engine at the same durability:
//! a commit returns only once it is on stable storage.
//!
//! ```text
//!  DIR/peers-PID-N/                    fresh for this run, removed at the end (also on error)
//!   1. raw:   one log block + flush with --flush-method, in a loop, on a preallocated file
//!             -> raw flushes/s, and the device flush requests one such flush costs
//!   2. per thread count T, per engine E, a fresh store in its own subdirectory E-tT:
//!        open -> one writer per thread -> settle -> counters -> T threads insert+commit
//!        until stopped -> counters -> close -> remove
//! ```
//!
//! Each commit is one transaction inserting one random 15 B key with a `--value-bytes` value.
//! Engines run in turn within each thread count, so every engine meets the machine's noise
//! of that moment and the ratio to tilldb compares neighbours. How each engine is made as
//! durable as tilldb's `Sync` is in `peers/engines/` (one file per engine) and printed under
//! the table.
//!
//! The peers (SQLite, LMDB, redb, fjall; RocksDB) are C/C++ and Rust builds that take
//! minutes, so they are optional dependencies behind the `peers` and `peers-rocksdb`
//! features of this crate: the workspace's default build and tests never compile them.
//! Without the feature this subcommand says how to build it and exits non-zero.
//!
//! JSON (stable for scripts; latencies in microseconds, rates per second):
//!
//! ```text
//! { workload: "peers-inserts", dir, value_bytes, seconds, machine { kernel, cpus,
//!   memory_bytes }, disk { fs_type, device, logical_block_bytes, physical_block_bytes,
//!   write_cache, fua, rotational }, flush_method, block_bytes, raw_flushes_per_sec,
//!   raw_p50_us, raw_p99_us, raw_device_flushes_per_flush (null when uncounted),
//!   engines: [ { engine, configuration } ],
//!   results: [ { engine, threads, durability ("sync" for all), commits, elapsed_seconds,
//!                commits_per_sec, close_seconds (the engine's close after the row),
//!                commits_per_sec_with_close (commits over the row and the close),
//!                p50_us, p99_us, max_us, device_flushes_per_sec,
//!                commits_per_device_flush, device_write_bytes_per_commit,
//!                dir_growth_bytes_per_commit, others_cpu_share (of all CPUs, 0-1),
//!                cpu_us_per_commit (this process: user + system, every thread; null where
//!                unknown),
//!                ratio_to_tilldb (null without a tilldb row at that thread count),
//!                ratio_to_raw } ] }
//! ```

#![expect(
    clippy::doc_markdown,
    reason = "SQLite and RocksDB are product names here, not code"
)]

#[cfg(feature = "peers")]
mod counters;
#[cfg(feature = "peers")]
pub(crate) mod engines;
#[cfg(feature = "peers")]
mod plot;
#[cfg(feature = "peers")]
mod report;
#[cfg(feature = "peers")]
mod run;

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tilldb::FlushMethod;

/// The command that builds and runs this benchmark, for the message without the feature.
#[cfg(not(feature = "peers"))]
const ENABLE_COMMAND: &str = "cargo run --release -p till --features peers -- bench peers";

/// A store that `till bench peers` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// tilldb, `Durability::Sync`.
    Tilldb,
    /// tilldb encrypted at rest (AES-256-GCM under a fixed key, docs/encryption.md), otherwise
    /// as `tilldb`: what encryption costs a durable commit, beside it (`--encrypt`).
    TilldbEncrypted,
    /// SQLite (bundled), `journal_mode=WAL`, `synchronous=FULL`.
    SqliteWal,
    /// SQLite (bundled), rollback journal (`journal_mode=DELETE`), `synchronous=FULL`.
    SqliteRollback,
    /// LMDB through heed, durable defaults.
    Lmdb,
    /// redb, `Durability::Immediate`.
    Redb,
    /// fjall, one keyspace, every batch persisted with `PersistMode::SyncData`.
    Fjall,
    /// RocksDB, `WriteOptions::set_sync(true)` (needs the `peers-rocksdb` feature).
    Rocksdb,
}

// `allow`, not `expect`: the binary reads none of the fields without the feature, but its
// test build does not report them, so an expectation would fail there.
#[derive(Args, Debug)]
#[cfg_attr(
    not(feature = "peers"),
    allow(
        dead_code,
        reason = "without the peers feature the flags are parsed, then the build is refused"
    )
)]
pub struct PeersArgs {
    /// Engines to run [default: tilldb and every peer this build has].
    #[arg(long, value_delimiter = ',')]
    engines: Vec<Engine>,
    /// Also run tilldb encrypted at rest, right after plain tilldb (the engine
    /// tilldb-encrypted); its ratio to tilldb is what encryption costs.
    #[arg(long)]
    encrypt: bool,
    /// Thread counts to run, one fresh store per engine each.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    threads: Vec<usize>,
    /// Seconds of commits per engine and thread count.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Bytes per inserted value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// How tilldb flushes its log; the raw flushed-write rate is measured with it too.
    #[arg(long, default_value = "fdatasync")]
    flush_method: FlushMethod,
    /// Directory for the scratch stores; each run uses and then removes a fresh
    /// subdirectory, with one subdirectory per engine and thread count in it.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw commits/s against threads, one line per engine, into this file (SVG, or PNG when
    /// it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

#[cfg(feature = "peers")]
pub fn run(args: &PeersArgs) -> Result<(), Box<dyn std::error::Error>> {
    run::run(args)
}

#[cfg(not(feature = "peers"))]
pub fn run(_args: &PeersArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err(not_built_message().into())
}

/// What `till bench peers` says when this build has no peers.
#[cfg(not(feature = "peers"))]
fn not_built_message() -> String {
    format!(
        "bench peers: this till was built without the peers. They (SQLite, LMDB, redb, \
         fjall) are optional because they take minutes to compile. Build and run with:\n\
         \n    {ENABLE_COMMAND}\n\n\
         or `cargo build --release -p till --features peers`. For RocksDB as well, use \
         `--features peers-rocksdb` (needs `apt-get install libclang-dev` and a long C++ \
         build)."
    )
}
