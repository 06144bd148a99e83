//! The close of a database whose write buffer holds commits (docs/write-buffer.md, "On by
//! default"). A handle dropped without `close` drains the buffer first, as `close` does, so
//! that the close can move the header's redo point to the log's end and trim the log. A
//! handle dropped while its thread panics drains nothing: its close must leave the redo point
//! where the next open still replays the buffered records, which are the only copy of their
//! writes (mutant `close-passes-the-buffer`).

use std::path::Path;
use std::sync::Arc;
use tilldb::io::{SimConfig, SimDisk};
use tilldb::{Db, Durability, Options};

fn options() -> Options {
    Options {
        background_threads: false,
        write_buffer_bytes: 1 << 30,
        ..Options::for_tests()
    }
}

fn open(disk: &Arc<SimDisk>) -> Db {
    Db::open_with_storage(Arc::new(SimDisk::clone(disk)), Path::new("/db"), options())
        .expect("open")
}

fn commit_buffered(db: &Db, key: &[u8], value: &[u8]) {
    let mut txn = db.begin().expect("begin");
    txn.put(key, value).expect("put");
    txn.commit_with(Durability::Buffered).expect("commit");
    assert!(
        db.stats().write_buffer_bytes > 0,
        "buffered: {:?}",
        db.stats()
    );
}

#[test]
fn a_handle_dropped_drains_its_buffer_and_one_dropped_in_a_panic_keeps_it_for_the_next_open() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let db = open(&disk);
    commit_buffered(&db, b"dropped", b"drained");
    drop(db);
    let db = open(&disk);
    assert_eq!(
        db.recovery().records,
        0,
        "the drop drained the buffer and its close moved the redo point to the log's end: {:?}",
        db.recovery()
    );
    assert_eq!(
        db.get(b"dropped").expect("get").as_deref(),
        Some(&b"drained"[..])
    );

    commit_buffered(&db, b"panicked", b"kept");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = db;
        panic!("the application panics holding the database");
    }));
    assert!(panicked.is_err(), "the closure panicked");
    let db = open(&disk);
    assert!(
        db.recovery().records >= 1,
        "the next open replayed the buffered record: {:?}",
        db.recovery()
    );
    assert_eq!(
        db.get(b"panicked").expect("get").as_deref(),
        Some(&b"kept"[..]),
        "a buffered commit lost: its handle was dropped in a panic, and the close moved the \
         redo point past its record"
    );
    assert_eq!(
        db.get(b"dropped").expect("get").as_deref(),
        Some(&b"drained"[..])
    );
    db.check().expect("the tree checks out");
}
