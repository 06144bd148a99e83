//! `till bench kv`: the whole embedded-store workload (issue 37), tilldb next to the stores a
//! user would pick instead, in one process, one run and one directory: the common embedded
//! key-value benchmark (24-byte random keys, 150-byte values), every engine with the same
//! cache and as durable as tilldb's `Sync` wherever it commits durably.
//!
//! ```text
//!  DIR/kv-PID-N/                 fresh for this run, removed at the end (also on error)
//!   per engine E, in turn, on a fresh store in E/ (removed after E):
//!    row                     operations                               commit     value
//!    bulk_load               N rows in ONE transaction                sync       rows/s
//!    individual_writes       1,000 transactions of one row            sync       commits/s
//!    batch_writes            100 transactions of 1,000 rows           sync       rows/s
//!    no_flush_writes         50,000 transactions of one row           no-flush   commits/s
//!    sorted_inserts          N/5 fresh increasing keys, 1,000 a txn   sync       rows/s
//!    point_reads_tT          N random gets of loaded keys, T threads  -          reads/s
//!    range_reads             N/10 ranges of 10 keys from a loaded key -          ranges/s
//!    removals                N/2 loaded keys in ONE transaction       sync       rows/s
//!    length                  count the entries once                   -          ms
//!    pop_first_last          N/100 pops, first and last by turns,     sync       rows/s
//!                            in ONE transaction
//!    retain                  remove every key retain's predicate      sync       rows/s read
//!                            rejects (half), ONE transaction
//!    extract_if              remove and read a quarter of the keys    sync       rows/s taken
//!                            of a tenth of the key space, ONE txn
//!    sorted_load             N fresh increasing keys above all, ONE   sync       rows/s
//!                            transaction (LMDB: MDB_APPEND)
//!    size_before_compaction  the directory after a clean close        -          bytes
//!    size_after_compaction   reopen, compact, close (the copy's size) -          bytes
//! ```
//!
//! N is `--rows` (default 1,000,000); `point_reads_tT` runs once per `--threads` count (default
//! 1, 4, 8, 16, 32), each thread reading N/T keys with one read transaction of its own. Keys
//! are 24 random bytes whose first byte is below 0xFF; the sorted inserts' keys start with
//! 0xFF, so they are fresh and each lands after every key before it (appends at the right
//! edge). Values are 150 bytes, random per key. Every row is timed alone; keys and values
//! are made before its clock starts. A `sync` commit returns once durable (tilldb
//! `Durability::Sync`); a `no-flush` commit once the engine has the data, with no flush to
//! the device (tilldb `Durability::Buffered`). How each engine does both, and its cache, is in
//! `kv/engines/` (one file per engine) and printed under the table.
//!
//! An engine's error never ends the run: the row is recorded as failed with the error's
//! text (and the engine reopened if it asks for it) and the next row runs. A one-transaction
//! row (bulk load, removals) that an engine refuses, as tilldb refuses a transaction larger
//! than a log record (`Error::TooLarge`, about 350,000 of these rows), is run again in
//! transactions of 50,000 rows (`run::CHUNK_ROWS`) and reported as `chunked`, with the
//! refusal, so the later rows still run on a loaded store. A chunked figure is not the row's
//! workload: it never counts as the row's best.
//!
//! The peers are the `peers` features' (`till bench peers`): SQLite, LMDB, redb, fjall, and
//! RocksDB with `peers-rocksdb`. Without the feature this subcommand says how to build it and
//! exits non-zero.
//!
//! JSON (`--json FILE`, stable for scripts; one result per engine and workload):
//!
//! ```text
//! { workload: "kv", dir, rows, key_bytes, value_bytes, cache_bytes, threads [..],
//!   machine { kernel, cpus, memory_bytes }, disk { fs_type, device, ... },
//!   engines: [ { engine, configuration, no_flush } ],
//!   results: [ { engine, workload, unit ("rows/s" | "commits/s" | "reads/s" | "ranges/s"
//!                | "ms" | "bytes"), higher_is_better, operations, threads (null but for
//!                point reads), seconds (the row's time; the compaction's for
//!                size_after_compaction), value (null when failed), status ("ok" |
//!                "chunked" | "failed"), error (null, or why it failed or was chunked),
//!                entries (length: the count; range reads: the entries read), parts
//!                (sizes only: { file or directory: allocated bytes }), best_engine (of
//!                the row's ok values),
//!                ratio_to_best (value / the best value; null without both) } ] }
//! ```

#![expect(
    clippy::doc_markdown,
    reason = "SQLite and RocksDB are product names here, not code"
)]

#[cfg(feature = "peers")]
mod engines;
#[cfg(feature = "peers")]
mod plot;
#[cfg(feature = "peers")]
mod reads;
#[cfg(feature = "peers")]
mod report;
#[cfg(feature = "peers")]
mod run;
#[cfg(feature = "peers")]
mod workload;

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tilldb::FlushMethod;

/// The command that builds and runs this benchmark, for the message without the feature.
#[cfg(not(feature = "peers"))]
const ENABLE_COMMAND: &str = "cargo run --release -p till --features peers -- bench kv";

/// A store that `till bench kv` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// tilldb: `Sync` and `Buffered` commits.
    Tilldb,
    /// tilldb encrypted at rest (AES-256-GCM under a fixed key, docs/encryption.md), otherwise
    /// as `tilldb`: what encryption costs, beside it (`--encrypt`).
    TilldbEncrypted,
    /// SQLite (bundled), `journal_mode=WAL`; `synchronous=FULL`, or `OFF` for no-flush.
    Sqlite,
    /// LMDB through heed; durable defaults, or `NO_SYNC` for no-flush.
    Lmdb,
    /// redb, `Durability::Immediate`, or `None` for no-flush.
    Redb,
    /// fjall, `PersistMode::SyncData` per batch, or no persist for no-flush.
    Fjall,
    /// RocksDB, `sync=true`, or `sync=false` for no-flush (needs `peers-rocksdb`).
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
pub struct KvArgs {
    /// Rows of the bulk load (N); sorted inserts are N/5, range reads N/10, removals N/2.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Engines to run, in this order [default: tilldb and every peer this build has].
    #[arg(long, value_delimiter = ',')]
    engines: Vec<Engine>,
    /// Also run tilldb encrypted at rest, right after plain tilldb (the engine
    /// tilldb-encrypted), and add the column of its figures over plain tilldb's.
    #[arg(long)]
    encrypt: bool,
    /// Thread counts of the random point reads, one row each.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16,32")]
    threads: Vec<usize>,
    /// Cache of every engine, in bytes (LMDB has none: the OS page cache) [default: 4 GiB, or
    /// a quarter of the machine's memory when that is less].
    #[arg(long)]
    cache_bytes: Option<u64>,
    /// tilldb's flush method [default: probed when the database is created, as
    /// `Options::default()` does].
    #[arg(long)]
    flush_method: Option<FlushMethod>,
    /// tilldb's torn-page guard (auto, doublewrite, full-page-images, atomic, none) [default:
    /// auto, chosen when the database is created, as `Options::default()` does].
    #[arg(long)]
    torn_page_guard: Option<tilldb::TornPageGuard>,
    /// tilldb's write buffer, in bytes (docs/write-buffer.md): commits kept in memory and
    /// applied to the tree many at a time; 0: off [default: 64 MiB, as `Options::default()`].
    #[arg(long, default_value_t = tilldb::Options::default().write_buffer_bytes)]
    write_buffer_bytes: u64,
    /// Directory for the scratch stores; each run uses and then removes a fresh
    /// subdirectory, one subdirectory per engine in it.
    #[arg(long, default_value = "tilldb-bench")]
    dir: PathBuf,
    /// Also write the JSON document (stable for scripts) to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw each engine's figure relative to the row's best, one bar per row and engine,
    /// into this file (SVG, or PNG when it ends in .png).
    #[arg(long, value_name = "FILE.svg|png", value_parser = crate::png::parse_plot_path)]
    plot: Option<PathBuf>,
}

#[cfg(feature = "peers")]
pub fn run(args: &KvArgs) -> Result<(), Box<dyn std::error::Error>> {
    run::run(args)
}

#[cfg(not(feature = "peers"))]
pub fn run(_args: &KvArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err(not_built_message().into())
}

/// What `till bench kv` says when this build has no peers.
#[cfg(not(feature = "peers"))]
fn not_built_message() -> String {
    format!(
        "bench kv: this till was built without the peers. They (SQLite, LMDB, redb, fjall) \
         are optional because they take minutes to compile. Build and run with:\n\
         \n    {ENABLE_COMMAND}\n\n\
         or `cargo build --release -p till --features peers`. For RocksDB as well, use \
         `--features peers-rocksdb` (needs `apt-get install libclang-dev` and a long C++ \
         build)."
    )
}

#[cfg(all(test, feature = "peers"))]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: KvArgs,
    }

    /// Runs the whole workload at 2,000 rows on tilldb, tilldb encrypted and LMDB and reads
    /// the JSON back: every (engine, workload) row is there, ok, with a positive figure, and
    /// the length row counted what the rows before it left.
    #[test]
    fn kv_bench_writes_every_row_for_tilldb_and_a_peer() {
        let base = tempfile::tempdir().expect("tempdir");
        let json = base.path().join("kv.json");
        let plot = base.path().join("kv.svg");
        let path = |p: &std::path::Path| p.to_str().expect("utf-8 path").to_owned();
        let cli = Cli::try_parse_from([
            "kv".to_owned(),
            "--rows=2000".to_owned(),
            "--engines=tilldb,lmdb".to_owned(),
            "--encrypt".to_owned(),
            "--threads=1,2".to_owned(),
            "--cache-bytes=16777216".to_owned(),
            "--flush-method=fdatasync".to_owned(),
            format!("--dir={}", path(&base.path().join("scratch"))),
            format!("--json={}", path(&json)),
            format!("--plot={}", path(&plot)),
        ])
        .expect("flags parse");
        run(&cli.args).expect("the bench runs");

        let text = std::fs::read_to_string(&json).expect("the JSON file");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let results = doc["results"].as_array().expect("results");
        let workloads = workload::names(&[1, 2]);
        assert_eq!(workloads.len(), 16, "{workloads:?}");
        for engine in ["tilldb", "tilldb-encrypted", "lmdb"] {
            for name in &workloads {
                let rows: Vec<_> = results
                    .iter()
                    .filter(|r| r["engine"] == engine && r["workload"] == name.as_str())
                    .collect();
                assert_eq!(rows.len(), 1, "{engine} {name}: {rows:?}");
                let row = rows[0];
                assert_eq!(row["status"], "ok", "{engine} {name}: {row}");
                let value = row["value"].as_f64().expect("a value");
                assert!(value > 0.0, "{engine} {name}: {row}");
                assert!(row["seconds"].as_f64().expect("seconds") > 0.0, "{row}");
            }
            let length = results
                .iter()
                .find(|r| r["engine"] == engine && r["workload"] == "length")
                .expect("length row");
            // 2,000 loaded + 1,000 + 100,000 + 50,000 written + 400 sorted - 1,000 removed.
            assert_eq!(length["entries"], 152_400, "{length}");
        }
        assert_eq!(results.len(), 3 * workloads.len());
        assert!(
            std::fs::read_to_string(&plot)
                .expect("the plot")
                .starts_with("<svg")
        );
        assert!(
            !base.path().join("scratch").exists(),
            "the scratch directory stayed"
        );
    }
}
