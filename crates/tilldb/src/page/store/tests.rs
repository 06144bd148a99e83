//! Unit tests of `store.rs`.

use super::*;
use crate::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};
use crate::page::PageKind;

const DIR: &str = "/db";

fn disk() -> SimDisk {
    with_dir(SimDisk::new(SimConfig::default()))
}

fn with_dir(disk: SimDisk) -> SimDisk {
    disk.create_dir_all(Path::new(DIR)).expect("mkdir");
    disk
}

fn page(id: u64, lsn: u64, fill: u8, page_bytes: u32) -> PageBuf {
    let mut page = PageBuf::new(PageId(id), PageKind::Leaf, page_bytes);
    page.set_lsn(lsn);
    page.body_mut().fill(fill);
    page
}

fn store(disk: &SimDisk, method: FlushMethod, page_bytes: u32) -> PageStore {
    PageStore::create(disk, Path::new(DIR), method, page_bytes).expect("create")
}

#[test]
fn create_holds_page_zero_only_and_is_durable() {
    let disk = disk();
    let s = store(&disk, FlushMethod::Fdatasync, 4096);
    assert_eq!(s.page_count(), 1);
    let durable = disk
        .durable_contents(Path::new("/db/data.tdb"))
        .expect("durable name");
    assert_eq!(durable, vec![0u8; 4096]);
    assert!(PageStore::create(&disk, Path::new(DIR), FlushMethod::Fdatasync, 4096).is_err());
}

#[test]
fn write_then_read_round_trip_for_every_method() {
    for method in FlushMethod::DURABLE {
        let disk = disk();
        let mut s = store(&disk, method, 8192);
        s.extend_to(4).expect("extend");
        let mut p = page(3, 7, 0xAB, 8192);
        s.write(&mut p).expect("write");
        s.flush().expect("flush");
        let back = s.read(PageId(3)).expect("read").expect("written");
        assert_eq!(back.bytes(), p.bytes(), "{method}");
        assert!(s.read(PageId(2)).expect("read").is_none(), "unwritten");
        assert!(s.read(PageId(4)).expect("read").is_none(), "past the end");
        assert!(
            s.read(PageId(400)).expect("read").is_none(),
            "far past the end"
        );
        s.check_invariants();
    }
}

#[test]
fn batch_coalesces_adjacent_pages_into_one_write() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    s.extend_to(20).expect("extend");
    let mut pages: Vec<PageBuf> = [10, 4, 3, 5, 11, 17]
        .into_iter()
        .map(|id| page(id, 1, u8::try_from(id).expect("small"), 4096))
        .collect();
    let writes = disk.call_count(IoKind::Write);
    s.write_batch(&mut pages).expect("batch");
    // Runs 3-5, 10-11 and 17.
    assert_eq!(disk.call_count(IoKind::Write) - writes, 3);
    let ids: Vec<u64> = pages.iter().map(|p| p.id().0).collect();
    assert_eq!(ids, [3, 4, 5, 10, 11, 17], "sorted in place");
    for p in &pages {
        assert_eq!(
            s.read(p.id()).expect("read").expect("written").bytes(),
            p.bytes()
        );
    }
}

#[test]
fn long_runs_are_cut_at_the_coalesce_limit() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 65536);
    let count = COALESCE_BYTES_MAX / 65536 * 2 + 1; // 33 pages, two full runs and one
    s.extend_to(count as u64 + 1).expect("extend");
    let mut pages: Vec<PageBuf> = (1..=count as u64).map(|id| page(id, 1, 9, 65536)).collect();
    let writes = disk.call_count(IoKind::Write);
    s.write_batch(&mut pages).expect("batch");
    assert_eq!(disk.call_count(IoKind::Write) - writes, 3);
    assert!(s.read(PageId(count as u64)).expect("read").is_some());
}

#[test]
#[should_panic(expected = "twice in one batch")]
fn a_page_twice_in_a_batch_panics() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    s.extend_to(5).expect("extend");
    let _ = s.write_batch(&mut [page(2, 1, 1, 4096), page(2, 2, 2, 4096)]);
}

#[test]
#[should_panic(expected = "extend_to first")]
fn writing_past_the_end_panics() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    let _ = s.write(&mut page(1, 1, 1, 4096));
}

#[test]
fn every_kind_of_bad_page_is_corruption_naming_file_and_offset() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    s.extend_to(8).expect("extend");
    s.write(&mut page(5, 3, 1, 4096)).expect("write");
    let path = Path::new("/db/data.tdb");
    for (offset, mask) in [(5 * 4096, 1), (5 * 4096 + 9, 0x80), (6 * 4096 - 1, 4)] {
        disk.corrupt(path, offset, mask);
        match s.read(PageId(5)) {
            Err(Error::Corruption { file, offset, what }) => {
                assert_eq!(file, path);
                assert_eq!(offset, 5 * 4096);
                assert_eq!(what, PageFault::BadCrc.what());
            }
            other => panic!("offset {offset}: {other:?}"),
        }
        disk.corrupt(path, offset, mask);
        assert!(s.read(PageId(5)).is_ok());
    }
    // A page written at another page's place (a misdirected write) does not validate.
    let image = disk.live_contents(path).expect("file")[5 * 4096..6 * 4096].to_vec();
    let mut buf = AlignedBuf::zeroed(4096);
    buf.copy_from_slice(&image);
    s.file.write_at(&buf, 6 * 4096).expect("write");
    let err = s.read(PageId(6)).expect_err("misdirected");
    assert!(err.to_string().contains("offset 24576"), "{err}");
}

#[test]
fn a_partial_place_at_the_end_reads_as_padded_and_is_zeroed_by_extend() {
    let disk = disk();
    let s = store(&disk, FlushMethod::Fdatasync, 16384);
    // A torn extension: half of page 1's place exists, holding half a page.
    let mut p = page(1, 1, 7, 16384);
    s.file.write_at(&p.seal()[..8192], 16384).expect("write");
    let s = PageStore::open(&disk, Path::new(DIR), FlushMethod::Fdatasync, 16384);
    let mut s = s.expect("open");
    assert_eq!(s.page_count(), 1);
    assert!(matches!(
        s.inspect(PageId(1)).expect("inspect"),
        PageSlot::Invalid(PageFault::BadCrc)
    ));
    s.extend_to(2).expect("extend");
    assert!(matches!(
        s.inspect(PageId(1)).expect("inspect"),
        PageSlot::Unwritten
    ));
    assert!(matches!(
        s.inspect(PageId(2)).expect("inspect"),
        PageSlot::Missing
    ));
}

#[test]
fn a_file_truncated_while_open_is_corruption_not_a_panic() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    s.extend_to(4).expect("extend");
    s.file.set_len(4096).expect("truncate");
    match s.read(PageId(2)) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 2 * 4096),
        other => panic!("{other:?}"),
    }
    assert!(s.read(PageId(4)).expect("past the end").is_none());
}

#[test]
fn a_failed_flush_poisons_every_later_write_and_flush() {
    let disk = disk();
    let mut s = store(&disk, FlushMethod::Fdatasync, 4096);
    s.extend_to(3).expect("extend");
    s.write(&mut page(1, 1, 1, 4096)).expect("write");
    disk.inject(Fault::once(IoKind::Flush, 1, FaultKind::FlushLosesData));
    assert!(s.flush().is_err());
    assert!(s.is_poisoned());
    assert!(s.flush().is_err_and(|e| e.is_poisoned()), "never retried");
    assert!(
        s.write(&mut page(2, 1, 1, 4096))
            .is_err_and(|e| e.is_poisoned())
    );
    assert!(s.extend_to(9).is_err_and(|e| e.is_poisoned()));
    assert!(s.read(PageId(1)).is_ok(), "reads go on");
}

#[test]
fn direct_io_on_a_four_k_native_device() {
    let disk = with_dir(SimDisk::new(SimConfig::four_k_native()));
    let mut s = store(&disk, FlushMethod::DirectDsync, 4096);
    s.extend_to(5).expect("extend");
    let mut pages = vec![
        page(1, 1, 1, 4096),
        page(2, 1, 2, 4096),
        page(4, 1, 4, 4096),
    ];
    s.write_batch(&mut pages).expect("batch");
    s.flush().expect("flush");
    let durable = disk
        .durable_contents(Path::new("/db/data.tdb"))
        .expect("durable");
    assert_eq!(&durable[4 * 4096..5 * 4096], pages[2].bytes());
}
