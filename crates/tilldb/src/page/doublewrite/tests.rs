//! Unit tests of `doublewrite.rs`.

use super::*;
use crate::io::{IoKind, SimConfig, SimDisk, Storage};
use crate::page::PageFault;
use crate::page::PageKind;

const DIR: &str = "/db";

fn page(id: u64, lsn: u64, fill: u8) -> PageBuf {
    let mut page = PageBuf::new(PageId(id), PageKind::Leaf, 4096);
    page.set_lsn(lsn);
    page.body_mut().fill(fill);
    page
}

fn setup(pages_max: usize) -> (SimDisk, PageStore, Doublewrite) {
    let disk = SimDisk::new(SimConfig::default());
    let dir = Path::new(DIR);
    disk.create_dir_all(dir).expect("mkdir");
    let mut store = PageStore::create(&disk, dir, FlushMethod::Fdatasync, 4096).expect("store");
    store.extend_to(16).expect("extend");
    let dw = Doublewrite::create(&disk, dir, FlushMethod::Fdatasync, 4096, pages_max).expect("dw");
    (disk, store, dw)
}

#[test]
fn one_write_and_one_flush_before_the_in_place_writes() {
    let (disk, mut store, mut dw) = setup(8);
    let mut pages = vec![page(3, 5, 3), page(1, 5, 1), page(2, 5, 2), page(9, 5, 9)];
    let (writes, flushes) = (
        disk.call_count(IoKind::Write),
        disk.call_count(IoKind::Flush),
    );
    dw.write_pages(&mut store, &mut pages).expect("write");
    // 1 batch write + 2 in-place runs (1-3, 9); 1 batch flush + 1 store flush.
    assert_eq!(disk.call_count(IoKind::Write) - writes, 3);
    assert_eq!(disk.call_count(IoKind::Flush) - flushes, 2);
    let BatchState::Valid(batch) = dw.read_batch().expect("read") else {
        panic!("no batch")
    };
    assert_eq!(batch.sequence, 1);
    let ids: Vec<u64> = batch.images.iter().map(|i| i.id.0).collect();
    assert_eq!(ids, [1, 2, 3, 9]);
    for (image, page) in batch.images.iter().zip(&pages) {
        assert_eq!(image.page.as_ref().expect("valid").bytes(), page.bytes());
    }
    for p in &pages {
        assert_eq!(
            store.read(p.id()).expect("read").expect("some").bytes(),
            p.bytes()
        );
    }
}

#[test]
fn more_pages_than_a_batch_go_in_several_batches() {
    let (disk, mut store, mut dw) = setup(2);
    let mut pages: Vec<PageBuf> = (1..=5).map(|id| page(id, 1, 1)).collect();
    let flushes = disk.call_count(IoKind::Flush);
    dw.write_pages(&mut store, &mut pages).expect("write");
    assert_eq!(
        disk.call_count(IoKind::Flush) - flushes,
        6,
        "3 batches, 2 flushes each"
    );
    let BatchState::Valid(batch) = dw.read_batch().expect("read") else {
        panic!("no batch")
    };
    assert_eq!(batch.sequence, 3);
    assert_eq!(batch.images.len(), 1);
    let reopened =
        Doublewrite::open(&disk, Path::new(DIR), FlushMethod::Fdatasync, 4096).expect("open");
    assert_eq!(reopened.pages_max(), 2);
    assert_eq!(reopened.next_sequence, 4);
}

#[test]
fn every_bit_flip_of_the_batch_header_is_torn_or_corruption() {
    let (disk, mut store, mut dw) = setup(4);
    dw.write_pages(&mut store, &mut [page(2, 1, 2), page(7, 1, 7)])
        .expect("write");
    let path = Path::new("/db/doublewrite.tdb");
    for bit in 0..BATCH_HEADER_BYTES * 8 {
        let offset = (bit / 8) as u64;
        let mask = 1u8 << (bit % 8);
        disk.corrupt(path, offset, mask);
        match dw.read_batch() {
            Ok(BatchState::Torn) => {}
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("bit {bit}: {other:?}"),
        }
        disk.corrupt(path, offset, mask);
    }
    assert!(matches!(dw.read_batch(), Ok(BatchState::Valid(_))));
}

#[test]
fn an_image_with_another_batchs_crc_is_invalid() {
    let (disk, mut store, mut dw) = setup(4);
    dw.write_pages(&mut store, &mut [page(2, 1, 2)])
        .expect("first");
    let path = Path::new("/db/doublewrite.tdb");
    let first = disk.live_contents(path).expect("file");
    dw.write_pages(&mut store, &mut [page(2, 2, 4)])
        .expect("second");
    // A torn batch write: the new header landed, the old image stayed. The old image is
    // a valid page 2, but not the one the header names.
    let mut old_image = AlignedBuf::zeroed(4096);
    old_image.copy_from_slice(&first[BATCH_HEADER_BYTES..BATCH_HEADER_BYTES + 4096]);
    dw.file
        .write_at(&old_image, BATCH_HEADER_BYTES as u64)
        .expect("write");
    let BatchState::Valid(batch) = dw.read_batch().expect("read") else {
        panic!("no batch")
    };
    assert!(batch.images[0].page.is_none());
    let report = restore_torn_pages(&mut store, &dw).expect("restore");
    assert_eq!(report.images_invalid, 1);
    assert!(report.restored.is_empty());
}

#[test]
fn restore_table_every_row() {
    let lsn = 10;
    let valid = |l| PageSlot::Valid(page(1, l, 0));
    let rows = [
        (PageSlot::Missing, RestoreAction::Restore),
        (PageSlot::Unwritten, RestoreAction::Restore),
        (PageSlot::Invalid(PageFault::BadCrc), RestoreAction::Restore),
        (
            PageSlot::Invalid(PageFault::WrongPageId),
            RestoreAction::Restore,
        ),
        (
            PageSlot::Invalid(PageFault::BadHeader),
            RestoreAction::Restore,
        ),
        (valid(lsn - 1), RestoreAction::Restore),
        (valid(lsn), RestoreAction::Keep),
        (valid(lsn + 1), RestoreAction::Keep),
    ];
    for (slot, action) in rows {
        assert_eq!(RestoreAction::decide(&slot, lsn), action, "{slot:?}");
    }
}

#[test]
fn restore_rewrites_torn_stale_and_missing_pages_only() {
    let (disk, mut store, mut dw) = setup(8);
    let data = Path::new("/db/data.tdb");
    dw.write_pages(
        &mut store,
        &mut [page(1, 1, 1), page(2, 1, 2), page(3, 1, 3)],
    )
    .expect("old");
    let mut new = vec![
        page(1, 5, 11),
        page(2, 5, 12),
        page(3, 5, 13),
        page(4, 5, 14),
    ];
    dw.write_pages(&mut store, &mut new).expect("new");
    // Page 1 torn, page 2 back at its old version, page 3 newer than the batch, page 4
    // zeroed: as a crash during the in-place writes (and a later write of 3) could leave.
    disk.corrupt(data, 4096 + 100, 0xFF);
    store.write(&mut page(2, 1, 2)).expect("stale");
    store.write(&mut page(3, 9, 33)).expect("newer");
    let other = disk.open(data, FlushMethod::Fdatasync).expect("open");
    other
        .write_at(&AlignedBuf::zeroed(4096), 4 * 4096)
        .expect("zeros");
    let report = restore_torn_pages(&mut store, &dw).expect("restore");
    assert_eq!(report.sequence, Some(2));
    assert_eq!(report.images_valid, 4);
    assert_eq!(report.restored, [PageId(1), PageId(2), PageId(4)]);
    for (id, want_lsn) in [(1, 5), (2, 5), (3, 9), (4, 5)] {
        let back = store.read(PageId(id)).expect("read").expect("some");
        assert_eq!(back.lsn(), want_lsn, "page {id}");
    }
    let again = restore_torn_pages(&mut store, &dw).expect("again");
    assert!(again.restored.is_empty(), "idempotent");
}

#[test]
fn empty_and_torn_batches_restore_nothing() {
    let (disk, mut store, dw) = setup(4);
    assert_eq!(
        restore_torn_pages(&mut store, &dw).expect("empty"),
        RestoreReport::default()
    );
    disk.corrupt(Path::new("/db/doublewrite.tdb"), 100, 1);
    let report = restore_torn_pages(&mut store, &dw).expect("torn");
    assert!(report.batch_torn);
    assert!(report.restored.is_empty());
}

#[test]
#[should_panic(expected = "extend_to first")]
fn a_page_past_the_end_panics_before_any_io() {
    let (disk, mut store, mut dw) = setup(4);
    let writes = disk.call_count(IoKind::Write);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dw.write_pages(&mut store, &mut [page(1, 1, 1), page(16, 1, 1)])
    }));
    assert_eq!(disk.call_count(IoKind::Write), writes, "nothing written");
    std::panic::resume_unwind(result.expect_err("panicked"));
}

#[test]
fn a_failure_poisons_the_guard() {
    use crate::io::{Fault, FaultKind};
    let (disk, mut store, mut dw) = setup(4);
    disk.inject(Fault::once(IoKind::Flush, 1, FaultKind::Eio));
    assert!(dw.write_pages(&mut store, &mut [page(1, 1, 1)]).is_err());
    assert!(dw.is_poisoned());
    assert!(matches!(
        dw.write_pages(&mut store, &mut [page(2, 1, 1)]),
        Err(Error::Poisoned)
    ));
}
