//! Free-space accounting (`Db::check_space`): every page of the data file is in exactly one
//! tree or on the free list; a page nobody owns (leaked) or two owners hold (doubly used) is
//! named, on a database whose header was damaged on purpose.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tilldb::internals::btree::MemPages;
use tilldb::internals::header::{HEADER_FILE_NAME, Header, SLOT_BYTES, SlotState, choose_slot};
use tilldb::internals::page::{PageBuf, PageId};
use tilldb::io::{AlignedBuf, SimConfig, SimDisk, Storage};
use tilldb::{Db, FlushMethod, Options};

const DIR: &str = "/db";

fn open(disk: &SimDisk) -> Db {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), Options::for_tests())
        .expect("open")
}

/// A database with free pages (most keys deleted again), a named table and an overflow value.
fn populated(disk: &SimDisk) -> Db {
    let db = open(disk);
    for batch in 0..20u32 {
        let mut txn = db.begin().expect("begin");
        for i in batch * 100..batch * 100 + 100 {
            txn.put(format!("key{i:06}").as_bytes(), &[7u8; 60])
                .expect("put");
        }
        txn.put_in("t", format!("t{batch}").as_bytes(), b"x")
            .expect("put");
        txn.commit().expect("commit");
    }
    let mut txn = db.begin().expect("begin");
    txn.put(b"big", &vec![1u8; 20_000]).expect("put");
    txn.commit().expect("commit");
    for batch in 0..15u32 {
        let mut txn = db.begin().expect("begin");
        for i in batch * 100..batch * 100 + 100 {
            txn.delete(format!("key{i:06}").as_bytes()).expect("delete");
        }
        txn.commit().expect("commit");
    }
    db
}

/// Writes the newest header of the database on `disk`, changed by `change`, as the next
/// generation into the other slot: what a buggy allocator could have written.
fn rewrite_header(disk: &SimDisk, change: impl FnOnce(&mut Header)) {
    let path = Path::new(DIR).join(HEADER_FILE_NAME);
    let bytes = disk.live_contents(&path).expect("header file");
    let slots: [SlotState; 2] = std::array::from_fn(|slot| {
        Header::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], slot).expect("slot")
    });
    let (slot, mut header) = choose_slot(slots).expect("valid").expect("a header");
    change(&mut header);
    header.generation += 1;
    let target = 1 - slot;
    let file = disk.open(&path, FlushMethod::Fdatasync).expect("open");
    file.write_at(&header.encode(target), (target * SLOT_BYTES) as u64)
        .expect("write");
    file.flush().expect("flush");
}

#[test]
fn every_page_is_in_one_tree_or_on_the_free_list() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let space = db.check_space().expect("check space");
    assert!(space.is_clean(), "{space:?}");
    assert!(space.free_pages > 10, "deletes freed pages: {space:?}");
    assert_eq!(
        space.tree_pages() + space.free_pages + 1,
        space.page_count,
        "page 0 plus trees plus free list: {space:?}"
    );
    let tables = db.check_tables().expect("check tables");
    assert_eq!(space.tables, tables);
    assert_eq!(
        space
            .tables
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["", "t"]
    );
    assert!(space.tables[0].1.overflow_pages >= 4, "the big value");
    db.close().expect("close");
    let db = open(&disk);
    assert_eq!(db.check_space().expect("after reopen"), space);
}

/// A header whose free-list head was lost: every free page is leaked, and each is named.
#[test]
fn a_lost_free_list_is_reported_page_by_page() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let before = db.check_space().expect("check space");
    db.close().expect("close");
    rewrite_header(&disk, |h| h.free_head = PageId(0));
    let db = open(&disk);
    let space = db.check_space().expect("check space");
    assert_eq!(space.free_pages, 0);
    assert_eq!(space.leaked.len() as u64, before.free_pages, "{space:?}");
    assert_eq!(space.leaked_pages, before.free_pages);
    assert!(space.doubly_used.is_empty());
    assert!(!space.is_clean());
}

/// A free list that starts at the default table's root: that page is named with both owners.
#[test]
fn a_free_list_into_a_tree_is_reported_as_doubly_used() {
    let disk = SimDisk::new(SimConfig::default());
    populated(&disk).close().expect("close");
    rewrite_header(&disk, |h| h.free_head = PageId(2));
    let db = open(&disk);
    let space = db.check_space().expect("check space");
    assert_eq!(
        space.doubly_used,
        vec![(
            PageId(2),
            "the default table".to_string(),
            "the free list".to_string()
        )]
    );
    assert!(!space.leaked.is_empty(), "the real free list is lost");
}

/// A header whose page count runs past the data: the pages past the end are leaked.
#[test]
fn a_page_count_past_the_data_leaks_the_pages_past_it() {
    let disk = SimDisk::new(SimConfig::default());
    populated(&disk).close().expect("close");
    let mut count = 0;
    rewrite_header(&disk, |h| {
        h.page_count += 2;
        count = h.page_count;
    });
    let db = open(&disk);
    let space = db.check_space().expect("check space");
    assert_eq!(space.leaked, vec![PageId(count - 2), PageId(count - 1)]);
    assert_eq!(space.leaked_pages, 2);
}

/// A damaged header whose page count runs billions of pages past the data: the check counts
/// them and lists the first few (it once collected every id, 2 GiB of them, until the fuzzer's
/// memory limit stopped it: `open_files`, CI stop 42).
#[test]
fn a_page_count_billions_past_the_data_is_counted_not_listed() {
    let disk = SimDisk::new(SimConfig::default());
    populated(&disk).close().expect("close");
    let mut before = 0;
    rewrite_header(&disk, |h| {
        before = h.page_count;
        h.page_count += 1 << 36;
    });
    let db = open(&disk);
    let started = std::time::Instant::now();
    let space = db.check_space().expect("check space");
    assert_eq!(space.leaked_pages, 1 << 36, "{:?}", space.leaked.first());
    assert_eq!(space.leaked.len(), tilldb::LEAKED_LISTED_MAX);
    assert_eq!(space.leaked[0], PageId(before));
    assert!(space.leaked.windows(2).all(|w| w[0].0 + 1 == w[1].0));
    assert!(!space.is_clean());
    assert!(
        started.elapsed().as_secs() < 60,
        "took {:?}",
        started.elapsed()
    );
}

/// A damaged header whose page count runs past what the log's commits after its checkpoint
/// counted: recovery would take the commits' smaller count and its checkpoint would write the
/// header's count backwards (an assertion, then a second panic while the handle dropped:
/// `open_files`, the input after the one above). Refused at open, naming the log record.
#[test]
fn a_header_page_count_past_the_logs_is_refused_not_a_panic() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    db.checkpoint().expect("checkpoint");
    for i in 0..3u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("after{i}").as_bytes(), b"v").expect("put");
        txn.commit().expect("commit");
    }
    std::mem::forget(db);
    disk.crash(tilldb::io::CrashMode::ProcessKill);
    rewrite_header(&disk, |h| h.page_count += 1000);
    let err = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), Options::for_tests())
        .map(|_| ())
        .expect_err("a header ahead of its log");
    match &err {
        tilldb::Error::Corruption { file, what, .. } => {
            assert!(file.ends_with("wal"), "{err}");
            assert!(what.contains("page count"), "{err}");
        }
        other => panic!("expected Corruption, got {other}"),
    }
}

/// `check_space_of` reads pages without a database: over the data file of a cleanly closed
/// database and its header's allocator state it finds what the open database finds; a free
/// list head past the page count is corruption.
#[test]
fn check_space_of_a_closed_data_file_agrees_with_the_open_database() {
    let disk = SimDisk::new(SimConfig::default());
    let db = populated(&disk);
    let open_space = db.check_space().expect("check space");
    db.close().expect("close");
    let data = disk
        .live_contents(&Path::new(DIR).join("data.tdb"))
        .expect("data file");
    let pages: BTreeMap<PageId, PageBuf> = (1..data.len() / 4096)
        .filter_map(|i| {
            let id = PageId(i as u64);
            let buf = AlignedBuf::from_slice_padded(&data[i * 4096..(i + 1) * 4096], 4096);
            PageBuf::from_bytes(id, buf)
                .expect("valid page")
                .map(|page| (id, page))
        })
        .collect();
    let mem = MemPages::from_pages(4096, pages);
    let header_bytes = disk
        .live_contents(&Path::new(DIR).join(HEADER_FILE_NAME))
        .expect("header");
    let slots: [SlotState; 2] = std::array::from_fn(|slot| {
        Header::decode(
            &header_bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES],
            slot,
        )
        .expect("slot")
    });
    let (_, header) = choose_slot(slots).expect("valid").expect("a header");
    let space = tilldb::internals::check_space_of(&mem, header.page_count, header.free_head)
        .expect("check space of");
    assert_eq!(space, open_space);
    let past =
        tilldb::internals::check_space_of(&mem, header.page_count, PageId(header.page_count + 5));
    assert!(
        matches!(past, Err(tilldb::Error::Corruption { what, .. }) if what.contains("past")),
        "{past:?}"
    );
}
