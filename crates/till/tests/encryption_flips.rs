//! A flipped bit anywhere in an encrypted database's files is caught (docs/encryption.md,
//! piece 6, "bit flips"). The database is copied while its writer is open, as a crash would
//! leave it: pages written by two checkpoints (the second one's doublewrite batch holding
//! only the pages it wrote), commits after the last checkpoint in the log, the log's last
//! block in a tail slot. Then one bit is flipped at a time, at a stride through every byte
//! that holds something (every page, log record, header slot, ledger slot) and a wider one
//! through zeros, and `till check` runs on the copy with the key. Each flip is one of:
//!
//! - **reported**: `till check` fails and names the file;
//! - **repaired or noted**: it passes, names the file (a data page restored from its
//!   doublewrite image, a header or page ledger slot that does not validate beside the one in
//!   use, a log segment's header that does not decode), and the database holds every row
//!   exactly;
//! - **never used**: it passes, says nothing, the database holds every row exactly, and the
//!   flip lies in a region listed here with the reason the format does not use it:
//!   - `doublewrite.tdb`: an image is read into the database only for a page the data file
//!     holds torn, and with one flip at a time every data page is whole;
//!   - `tilldb.durable`: published for read-only handles beside a live writer; a writer's
//!     open (the check's) writes it anew;
//!   - a log segment: the zeros of its header block after the header, the home of the log's
//!     last block (its bytes are taken from the tail slot), the zeros past the log's end, and
//!     the older tail slot;
//! - **the log's tail**: only in the newest tail slot, a flip may end the log before the last
//!   commits of its block, with `till check` passing: a single log cannot tell a flipped bit
//!   there from a write torn by a crash (README, "Guarantees"; docs/durability.md, "What is
//!   assumed of the device"), and the threat model leaves cutting the log's tail out of scope.
//!
//! No flip may be returned as data: whenever `till check` passes, the database opened (in
//! memory, with the key) holds every row exactly, and in the newest tail slot the rows of
//! one of the states the last commits passed through.
//!
//! A single flip is caught by the checksums first (each covers the sealed bytes, the tag and
//! the MAC); the tag and MAC checks behind them are proven with the checksum made again after
//! the change: at every bit in `page/sealed.rs` and `wal/record.rs`, through the database in
//! `tests/encryption_pages.rs` and `tests/encryption_log.rs`, and for the header in
//! `tests/encryption_keys.rs` (mutants `page-tag-unchecked`, `record-tag-unchecked`,
//! `header-mac-unchecked`). Sampled every 97 bytes, not every byte: about 40 s here.

mod common;

use common::{copy_dir, options, till};
use std::ops::{Bound, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::io::{FileStorage, OverlayStorage};
use tilldb::{Db, Direction, Encryption, Options};

const KEY: [u8; 32] = [0x3c; 32];
/// Bytes between two flips where the file holds something (every byte of a file this short
/// or shorter).
const STRIDE: usize = 97;
/// Bytes between two flips through zeros.
const ZERO_STRIDE: usize = 8191;
/// The trailer of a log tail slot: magic at `block - 32`, durable lsn at `block - 16`.
const SLOT_TRAILER: usize = 32;

type Rows = Vec<(String, Vec<u8>, Vec<u8>)>;

fn with_key() -> Options {
    Options {
        encryption: Some(Encryption::with_key(&KEY)),
        background_threads: false,
        ..options()
    }
}

/// Every row of the database in `dir`, opened with the key in memory (no file changes).
fn rows(dir: &Path) -> tilldb::Result<Rows> {
    let overlay = Arc::new(OverlayStorage::new(Arc::new(FileStorage::read_only())));
    let db = Db::open_with_storage(overlay, dir, with_key())?;
    let read = db.begin_read()?;
    let mut all = Vec::new();
    for table in ["", "sales"] {
        let range = read.range_in(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )?;
        for entry in range {
            let (key, value) = entry?;
            all.push((table.to_owned(), key, value));
        }
    }
    Ok(all)
}

/// The rows after the first `commits` of the 30 commits [`database`] makes after its last
/// checkpoint: what a log cut before the others holds.
fn state_after(commits: u32) -> Rows {
    let receipt = |i: u32| {
        let value = if (3..=5).contains(&i) {
            b"refunded".to_vec()
        } else if (100..100 + commits).contains(&i) {
            b"changed".to_vec()
        } else {
            vec![u8::try_from(i % 256).expect("a byte"); 100]
        };
        (String::new(), format!("receipt-{i:05}").into_bytes(), value)
    };
    let sale = |i: u32| {
        (
            "sales".to_owned(),
            format!("sale-{i:03}").into_bytes(),
            vec![7; 40],
        )
    };
    (0..300)
        .map(receipt)
        .chain((0..commits).map(sale))
        .collect()
}

/// The database to flip bits in: written by a live writer and copied while it is open.
fn database(tmp: &Path) -> PathBuf {
    let live = tmp.join("live");
    let db = Db::open(&live, with_key()).expect("create");
    let mut txn = db.begin().expect("begin");
    for i in 0..300u32 {
        txn.put(
            format!("receipt-{i:05}").as_bytes(),
            &[u8::try_from(i % 256).expect("a byte"); 100],
        )
        .expect("put");
    }
    txn.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    // The second checkpoint writes the pages of a few receipts only: its doublewrite batch
    // leaves the other pages without an image.
    for i in [3u32, 4, 5] {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("receipt-{i:05}").as_bytes(), b"refunded")
            .expect("put");
        txn.commit().expect("commit");
    }
    db.checkpoint().expect("checkpoint");
    for i in 0..30u32 {
        let mut txn = db.begin().expect("begin");
        txn.put_in("sales", format!("sale-{i:03}").as_bytes(), &[7; 40])
            .expect("put");
        txn.put(format!("receipt-{:05}", 100 + i).as_bytes(), b"changed")
            .expect("put");
        txn.commit().expect("commit");
    }
    let copy = tmp.join("copy");
    copy_dir(&live, &copy);
    db.close().expect("close");
    copy
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Where the log is, as `till dump-log --json` reads it (with the key).
struct Log {
    /// The segment the log ends in, and the offset of its end.
    end: (PathBuf, usize),
    block: usize,
    segment_bytes: usize,
}

fn log(dir: &Path, key_file: &Path) -> Log {
    let run = till(&[
        "dump-log",
        dir.to_str().expect("UTF-8"),
        "--key-file",
        key_file.to_str().expect("UTF-8"),
        "--json",
    ]);
    assert!(run.ok, "{}", run.text());
    let json = run.json();
    let end = &json["end"];
    assert_eq!(end["clean"], true, "{json}");
    let segment = &json["segments"][0];
    assert_eq!(json["segments"].as_array().map(Vec::len), Some(1), "{json}");
    let number =
        |v: &serde_json::Value| usize::try_from(v.as_u64().expect("a number")).expect("fits");
    Log {
        end: (
            PathBuf::from(end["file"].as_str().expect("file")),
            number(&end["offset"]),
        ),
        block: number(&segment["log_block_bytes"]),
        segment_bytes: number(&segment["segment_bytes"]),
    }
}

/// The regions of `file` a flip may pass unnoticed in, with rows unchanged (the module doc's
/// "never used"), and the newest tail slot of a segment (the log's tail).
fn never_used(file: &Path, bytes: &[u8], log: &Log) -> (Vec<Range<usize>>, Option<Range<usize>>) {
    let name = file.file_name().and_then(|n| n.to_str()).expect("a name");
    let whole = 0..bytes.len();
    match name {
        "doublewrite.tdb" | "tilldb.durable" => (vec![whole], None),
        _ if is_segment(name) => {
            let (block, len) = (log.block, log.segment_bytes);
            assert_eq!(bytes.len(), len, "{}", file.display());
            let slots = [len - 2 * block..len - block, len - block..len];
            let durable = |slot: &Range<usize>| {
                let trailer = slot.end - SLOT_TRAILER;
                (bytes[trailer..trailer + 4] == *b"TLSL").then(|| {
                    u64::from_le_bytes(bytes[trailer + 16..trailer + 24].try_into().expect("8"))
                })
            };
            let newest = usize::from(durable(&slots[1]) > durable(&slots[0]));
            assert!(durable(&slots[newest]).is_some(), "no tail slot written");
            let end = log.end.1;
            assert!(log.end.0.ends_with(name), "one segment");
            let home = end / block * block..end.div_ceil(block) * block;
            let regions = vec![
                64..block,
                home.start..len - 2 * block,
                slots[1 - newest].clone(),
            ];
            (regions, Some(slots[newest].clone()))
        }
        _ => (Vec::new(), None),
    }
}

/// Whether the file `name` is a log segment (`{generation:020}.wal`).
fn is_segment(name: &str) -> bool {
    Path::new(name).extension().is_some_and(|e| e == "wal")
}

/// Offsets to flip in `bytes`: every `STRIDE`-th up to the last non-zero byte, every
/// `ZERO_STRIDE`-th after it.
fn offsets(bytes: &[u8]) -> Vec<usize> {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    let stride = if bytes.len() <= STRIDE { 1 } else { STRIDE };
    (0..end)
        .step_by(stride)
        .chain((end..bytes.len()).step_by(ZERO_STRIDE))
        .collect()
}

#[derive(Default, Debug)]
struct Counts {
    reported: usize,
    named: usize,
    never_used: usize,
    tail: usize,
}

#[test]
fn a_flipped_bit_in_any_encrypted_file_is_reported_repaired_or_never_used() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = database(tmp.path());
    let key_file = tmp.path().join("till.key");
    std::fs::write(&key_file, KEY).expect("key file");
    let (d, k) = (
        dir.to_str().expect("UTF-8"),
        key_file.to_str().expect("UTF-8"),
    );
    let expected = rows(&dir).expect("rows");
    assert!(expected == state_after(30), "the workload's rows");
    let clean = till(&["check", d, "--key-file", k]);
    assert!(clean.ok, "{}", clean.text());
    let log = log(&dir, &key_file);
    let mut total = Counts::default();
    for file in files(&dir) {
        let bytes = std::fs::read(&file).expect("read");
        let name = file.file_name().and_then(|n| n.to_str()).expect("a name");
        let (quiet, tail) = never_used(&file, &bytes, &log);
        let mut counts = Counts::default();
        for (n, offset) in offsets(&bytes).into_iter().enumerate() {
            let mut changed = bytes.clone();
            changed[offset] ^= 1 << ((offset + n) % 8);
            std::fs::write(&file, &changed).expect("flip");
            let run = till(&["check", d, "--key-file", k]);
            let at = format!("{} offset {offset}", file.display());
            if !run.ok {
                assert!(run.text().contains(name), "{at}: not named: {}", run.text());
                counts.reported += 1;
                continue;
            }
            let found = rows(&dir);
            if tail.as_ref().is_some_and(|t| t.contains(&offset)) {
                // The log may end before some of the last commits; what it holds is whole.
                let found = found.unwrap_or_else(|e| panic!("{at}: {e}"));
                assert!(
                    (0..=30).any(|k| found == state_after(k)),
                    "{at}: the rows are no state the commits passed through"
                );
                counts.tail += 1;
                continue;
            }
            assert!(
                found.as_ref().is_ok_and(|r| *r == expected),
                "{at}: check passed but the rows differ: {:?}",
                found.map(|r| r.len())
            );
            // Named: a line about the file that the check of the unchanged copy did not print.
            let noted = run
                .stdout
                .lines()
                .any(|line| line.contains(name) && !clean.stdout.lines().any(|c| c == line));
            if noted {
                counts.named += 1;
            } else {
                assert!(
                    quiet.iter().any(|r| r.contains(&offset)),
                    "{at}: check passed and said nothing: {}",
                    run.text()
                );
                counts.never_used += 1;
            }
        }
        std::fs::write(&file, &bytes).expect("restore");
        println!("{name}: {counts:?}");
        total.reported += counts.reported;
        total.named += counts.named;
        total.never_used += counts.never_used;
        total.tail += counts.tail;
        // What each file's flips must have met: the data file's pages both reported (no
        // image) and repaired (an image in the last batch); the header's slots noted; the
        // log's records reported.
        match name {
            "data.tdb" => assert!(
                counts.reported > 0 && counts.named > 0,
                "{name}: {counts:?}"
            ),
            "tilldb.meta" | "ledger.tdb" => assert!(counts.named > 0, "{name}: {counts:?}"),
            _ if is_segment(name) => assert!(counts.reported > 0, "{name}: {counts:?}"),
            _ => {}
        }
    }
    println!("every file: {total:?}");
}
