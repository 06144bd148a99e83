//! Encryption at rest: no message gives away what the files hide (docs/encryption.md, piece
//! 6). Every `tracing` event and span tilldb emits, at every level, and the text of every
//! error the workload meets is captured while an encrypted database with markers in its table
//! names, keys and values goes through commits, a transaction whose write set spills, a
//! commit in parts, checkpoints, a backup, a compaction, a crash and the recovery after it, a
//! damaged page reported (`Corruption` naming file and offset), and opens refused for a
//! missing and a wrong key. None of them holds an
//! 8-byte window of a marker, nor the application's key or the database's data key (their
//! bytes, their hex, their `Debug` rendering). The capture is checked to work: it holds the checkpoints' events and the
//! refusals' key ids.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, Encryption, Options, TornPageGuard};

/// Table names, keys and values each carry one of these.
const MARKERS: [&[u8]; 3] = [b"TABLE-MARK-91aa", b"KEY-MARKER-3c70", b"VALUE-MARK-e25b"];
/// The application's key: bytes that are not text, so any rendering of them is one of those
/// searched for.
const KEY: [u8; 32] = [0xa7; 32];

/// Every message captured: events and span fields, as `target name=value ...`.
fn captured() -> &'static Mutex<Vec<String>> {
    static CAPTURED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    CAPTURED.get_or_init(|| Mutex::new(Vec::new()))
}

/// A subscriber that keeps every field of every event and span, at every level.
struct Capture {
    next_span: AtomicU64,
}

/// One event's or span's fields, rendered with `Debug`.
struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        write!(self.0, " {}={value:?}", field.name()).expect("a String takes it");
    }
}

/// Keeps one captured message.
fn keep(target: &str, fields: &Fields) {
    captured()
        .lock()
        .expect("captured")
        .push(format!("{target}{}", fields.0));
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields(String::new());
        span.record(&mut fields);
        keep(span.metadata().target(), &fields);
        tracing::span::Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Fields(String::new());
        values.record(&mut fields);
        keep("span", &fields);
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        keep(event.metadata().target(), &fields);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

fn options(key: Option<[u8; 32]>) -> Options {
    Options {
        encryption: key.map(|key| Encryption::with_key(&key)),
        torn_page_guard: TornPageGuard::Doublewrite,
        page_bytes: Some(4096),
        cache_bytes: 16 * 4096,
        write_set_bytes: 64 << 10,
        commit_part_bytes: 32 << 10,
        ..Options::for_tests()
    }
}

fn table(t: u32) -> String {
    format!("{}-{t}", String::from_utf8_lossy(MARKERS[0]))
}

fn key(i: u32) -> Vec<u8> {
    [MARKERS[1], format!("-{i:06}").as_bytes()].concat()
}

fn value(i: u32) -> Vec<u8> {
    [MARKERS[2], format!("-{i:06}-").as_bytes(), &[b'v'; 60]].concat()
}

/// The data key of the database in `dir`, unwrapped from its header with `KEY`.
fn data_key(dir: &Path) -> [u8; 32] {
    use tilldb::KeyProvider as _;
    use tilldb::internals::header::{Header, SLOT_BYTES, SlotState, choose_slot};
    let bytes = std::fs::read(dir.join("tilldb.meta")).expect("header file");
    let slots: [SlotState; 2] = std::array::from_fn(|slot| {
        Header::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], slot).expect("slot")
    });
    let (_, header) = choose_slot(slots).expect("valid").expect("a header");
    let block = header.encryption.expect("encrypted");
    *tilldb::StaticKey::new(&KEY)
        .unwrap(block.wrapped(), &block.context())
        .expect("the key opens the wrap")
        .bytes()
}

/// Commits, a large transaction, checkpoints, a backup and a compaction on a real directory;
/// returns the database's data key.
fn on_a_real_directory(tmp: &Path, errors: &mut Vec<String>) -> [u8; 32] {
    let dir = tmp.join("db");
    let db = Db::open(&dir, options(Some(KEY))).expect("create");
    for i in 0..200 {
        let mut txn = db.begin().expect("begin");
        txn.put_in(&table(i % 3), &key(i), &value(i)).expect("put");
        txn.commit().expect("commit");
    }
    db.checkpoint().expect("checkpoint");
    let mut txn = db.begin().expect("begin");
    for i in 1000..4000 {
        txn.put_in(&table(7), &key(i), &value(i)).expect("put");
    }
    txn.commit().expect("a commit in parts");
    db.checkpoint().expect("checkpoint");
    db.backup_to(tmp.join("backup")).expect("backup");
    db.compact_to(tmp.join("compacted")).expect("compact");
    db.close().expect("close");
    for refused in [
        Db::open(&dir, options(None)),
        Db::open(&dir, options(Some([1; 32]))),
    ] {
        errors.push(refused.expect_err("refused").to_string());
    }
    // A page changed on disk, with no image in the last doublewrite batch: `Corruption`, its
    // file and offset in the text.
    let data = dir.join("data.tdb");
    let mut bytes = std::fs::read(&data).expect("data file");
    bytes[4096 + 700] ^= 0x20;
    std::fs::write(&data, &bytes).expect("tear a page");
    match Db::open(&dir, options(Some(KEY))) {
        Ok(db) => db.close().expect("close"),
        Err(e) => errors.push(e.to_string()),
    }
    data_key(&dir)
}

/// `Buffered` commits and an open transaction, then a crash on the simulated disk and the
/// recovery after it.
fn through_a_crash(errors: &mut Vec<String>) {
    let disk = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(disk.clone());
    let dir = Path::new("/db");
    let options = Options {
        background_threads: false,
        ..options(Some(KEY))
    };
    let db = Db::open_with_storage(storage.clone(), dir, options.clone()).expect("create");
    for i in 0..100 {
        let mut txn = db.begin().expect("begin");
        txn.put_in(&table(1), &key(i), &value(i)).expect("put");
        txn.commit_with(Durability::Buffered).expect("commit");
    }
    let mut open = db.begin().expect("begin");
    for i in 5000..5500 {
        open.put_in(&table(2), &key(i), &value(i)).expect("put");
    }
    disk.crash(CrashMode::ProcessKill);
    drop(open);
    drop(db);
    let after: Arc<dyn Storage> = Arc::new(disk.clone());
    match Db::open_with_storage(after, dir, options) {
        Ok(db) => db.close().expect("close"),
        Err(e) => errors.push(e.to_string()),
    }
}

#[test]
fn no_event_span_or_error_text_holds_a_marker_or_the_key() {
    tracing::subscriber::set_global_default(Capture {
        next_span: AtomicU64::new(1),
    })
    .expect("the only subscriber of this test binary");
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut errors = Vec::new();
    let data_key = on_a_real_directory(tmp.path(), &mut errors);
    through_a_crash(&mut errors);
    let mut messages = captured().lock().expect("captured").clone();
    let events = messages.len();
    messages.extend(errors.iter().cloned());

    // The capture works: checkpoints were logged, and the refusals name the key's id.
    assert!(
        messages[..events].iter().any(|m| m.contains("checkpoint")),
        "no checkpoint event captured: {:?}",
        &messages[..events.min(20)]
    );
    assert!(
        errors.iter().filter(|e| e.contains("kek:")).count() >= 2,
        "{errors:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("data.tdb at offset 4096")),
        "the damaged page's report: {messages:?}"
    );

    let mut secrets: Vec<Vec<u8>> = MARKERS
        .iter()
        .flat_map(|m| m.windows(8).map(<[u8]>::to_vec))
        .collect();
    for key in [KEY, data_key] {
        let hex = key.iter().fold(String::new(), |mut hex, b| {
            write!(hex, "{b:02x}").expect("a String takes it");
            hex
        });
        secrets.push(hex.as_bytes()[..16].to_vec());
        secrets.push(hex[..16].to_uppercase().into_bytes());
        secrets.push(key[..8].to_vec());
        secrets.push(
            format!("{:?}", &key[..4])
                .trim_end_matches(']')
                .as_bytes()
                .to_vec(),
        );
    }
    for message in &messages {
        for secret in &secrets {
            assert!(
                !message
                    .as_bytes()
                    .windows(secret.len())
                    .any(|w| w == secret.as_slice()),
                "a message holds {:?}: {message}",
                String::from_utf8_lossy(secret)
            );
        }
    }
    println!(
        "{events} events and spans, {} error texts: no marker, no key",
        errors.len()
    );
}
