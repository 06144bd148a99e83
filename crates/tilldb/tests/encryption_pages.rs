//! Encryption at rest, piece 4 (docs/encryption.md): an encrypted database's data file and
//! doublewrite file. Its pages are version 2, their bodies sealed under the writing epoch's
//! key with a trailer (`page/sealed.rs`): after checkpoints neither file holds a byte of a key
//! or value written, and the same workload unencrypted does (so the check can fail). The
//! doublewrite batch and the data file hold the very same sealed bytes (one seal for both
//! copies). A page changed on disk with its crc made again is `Corruption` naming the data
//! file and the page's offset; so is a plain page put in its place, and a changed image in the
//! doublewrite file, naming that file. An encrypted page's body is 40 bytes shorter, so its
//! longest key is too.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::io::{SimConfig, SimDisk, Storage};
use tilldb::{Db, Error, FlushMethod, Options, TornPageGuard};

const DIR: &str = "/db";
const MARKER: &[u8] = b"MARKER-51ad";
const PAGE_BYTES: usize = 4096;

fn options(encrypted: bool) -> Options {
    Options {
        encryption: encrypted.then(|| Encryption {
            provider: Arc::new(StaticKey::new(&[0x44; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        page_bytes: Some(4096),
        torn_page_guard: TornPageGuard::Doublewrite,
        background_threads: false,
        ..Options::for_tests()
    }
}

fn key_of(i: u32) -> Vec<u8> {
    [MARKER, format!("-key-{i:05}").as_bytes()].concat()
}

fn value_of(i: u32) -> Vec<u8> {
    [MARKER, format!("-value-{i:05}-").as_bytes(), &[b'v'; 60]].concat()
}

fn open(disk: &SimDisk, encrypted: bool) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options(encrypted))
}

/// A database of `rows` rows in commits of 100, checkpointed (its pages written through the
/// doublewrite file), its first row written again and checkpointed, and closed.
fn written(encrypted: bool, rows: u32) -> SimDisk {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk, encrypted).expect("create");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin().expect("begin");
        for &i in chunk {
            txn.put(&key_of(i), &value_of(i)).expect("put");
        }
        txn.commit().expect("commit");
    }
    db.checkpoint().expect("checkpoint");
    // A second checkpoint of one changed row: the last doublewrite batch holds its pages
    // only, so most pages lie outside it.
    let mut txn = db.begin().expect("begin");
    txn.put(&key_of(0), &value_of(0)).expect("put");
    txn.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    db.close().expect("close");
    disk
}

fn file(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn holds_marker(bytes: &[u8]) -> bool {
    bytes.windows(8).any(|w| MARKER.windows(8).any(|m| m == w))
}

fn all_rows_read(disk: &SimDisk, rows: u32) -> tilldb::Result<()> {
    let db = open(disk, true)?;
    for i in 0..rows {
        assert_eq!(db.get(&key_of(i))?, Some(value_of(i)), "row {i}");
    }
    db.check()?;
    Ok(())
}

/// The page id stored at `at` of `bytes`.
fn id_at(bytes: &[u8], at: usize) -> usize {
    let id = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
    usize::try_from(id).expect("a page id")
}

/// The pages of the doublewrite file's last batch: an open restores them from it.
fn in_last_batch(disk: &SimDisk) -> Vec<usize> {
    let dw = disk.live_contents(&file("doublewrite.tdb")).expect("dw");
    let count = u32::from_le_bytes(dw[24..28].try_into().expect("4")) as usize;
    (0..count).map(|i| id_at(&dw, 32 + i * 12)).collect()
}

/// A leaf page (kind 1, from its plain header) of the data file that the doublewrite file's
/// last batch does not hold (an open would restore that one from its image).
fn a_leaf(disk: &SimDisk, data: &[u8]) -> usize {
    let restored = in_last_batch(disk);
    (1..data.len() / PAGE_BYTES)
        .rev()
        .find(|&id| data[id * PAGE_BYTES + 4] == 1 && !restored.contains(&id))
        .expect("a leaf outside the last batch")
}

fn with_crc_made_again(page: &mut [u8], id: usize) {
    let crc = common::crc32c(Some(id as u64), &page[4..]);
    page[..4].copy_from_slice(&crc.to_le_bytes());
}

fn overwrite(disk: &SimDisk, path: &Path, offset: usize, bytes: &[u8]) {
    let f = disk
        .clone()
        .open(path, FlushMethod::Fdatasync)
        .expect("open");
    f.write_at(bytes, offset as u64).expect("write");
}

/// Changes page `id` of the data file on `disk` with `change`, its crc made again (a change
/// on purpose, not a tear).
fn change_page(disk: &SimDisk, id: usize, change: impl FnOnce(&mut [u8])) {
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    let mut page = data[id * PAGE_BYTES..(id + 1) * PAGE_BYTES].to_vec();
    change(&mut page);
    with_crc_made_again(&mut page, id);
    overwrite(disk, &file("data.tdb"), id * PAGE_BYTES, &page);
}

/// `result` must be `Corruption` naming page `id` of the data file, saying `text`.
fn assert_corrupt_page<T>(result: tilldb::Result<T>, id: usize, text: &str, case: &str) {
    match result {
        Err(Error::Corruption {
            file: f,
            offset,
            what,
        }) => {
            assert_eq!((f, offset), (file("data.tdb"), (id * PAGE_BYTES) as u64));
            assert!(what.contains(text), "{what}");
        }
        Err(other) => panic!("{case}: {other:?}"),
        Ok(_) => panic!("{case}"),
    }
}

#[test]
fn an_encrypted_databases_data_and_doublewrite_files_hold_no_key_or_value() {
    let rows = 2000;
    for encrypted in [false, true] {
        let disk = written(encrypted, rows);
        for name in ["data.tdb", "doublewrite.tdb"] {
            let bytes = disk.live_contents(&file(name)).expect(name);
            assert_eq!(
                holds_marker(&bytes),
                !encrypted,
                "{name}, encrypted: {encrypted}"
            );
        }
        let data = disk.live_contents(&file("data.tdb")).expect("data");
        let versions: std::collections::BTreeSet<u8> = (1..data.len() / PAGE_BYTES)
            .map(|id| data[id * PAGE_BYTES + 5])
            .filter(|&v| v != 0)
            .collect();
        let expected = if encrypted { 2 } else { 1 };
        assert_eq!(versions, [expected].into(), "page versions");
        if encrypted {
            all_rows_read(&disk, rows).expect("reopened");
        }
    }
}

/// Sealed once: the last batch's images are the bytes in place, not a second seal of them.
#[test]
fn the_doublewrite_batch_and_the_data_file_hold_the_same_sealed_bytes() {
    let disk = written(true, 600);
    let dw = disk.live_contents(&file("doublewrite.tdb")).expect("dw");
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    let ids = in_last_batch(&disk);
    assert!(!ids.is_empty(), "a batch was written");
    for (i, &id) in ids.iter().enumerate() {
        let image = &dw[4096 + i * PAGE_BYTES..4096 + (i + 1) * PAGE_BYTES];
        assert_eq!(image[5], 2, "image {i} is a sealed page");
        assert!(
            image == &data[id * PAGE_BYTES..(id + 1) * PAGE_BYTES],
            "image {i} of page {id} differs from the page in place"
        );
    }
}

#[test]
fn a_page_changed_on_disk_with_its_crc_made_again_is_corruption_naming_the_data_file() {
    let rows = 600;
    let disk = written(true, rows);
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    let id = a_leaf(&disk, &data);
    change_page(&disk, id, |page| page[100] ^= 0x04);
    assert_corrupt_page(
        all_rows_read(&disk, rows),
        id,
        "authentication",
        "a changed page was read",
    );
}

#[test]
fn a_plain_page_put_into_an_encrypted_data_file_is_corruption() {
    let rows = 600;
    let disk = written(true, rows);
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    let id = a_leaf(&disk, &data);
    change_page(&disk, id, |page| page[5] = 1);
    assert_corrupt_page(
        all_rows_read(&disk, rows),
        id,
        "another format",
        "a plain page was read in an encrypted file",
    );
}

/// A changed image in the doublewrite file, with every crc that covers it made again, is
/// never written in place: the open that would restore from it stops naming the image.
#[test]
fn a_changed_doublewrite_image_is_corruption_naming_the_doublewrite_file() {
    let disk = written(true, 600);
    let path = file("doublewrite.tdb");
    let mut dw = disk.live_contents(&path).expect("dw");
    let id = id_at(&dw, 32);
    let image = 4096..4096 + PAGE_BYTES;
    dw[image.start + 200] ^= 0x20;
    with_crc_made_again(&mut dw[image.clone()], id);
    let crc = dw[image.start..image.start + 4].to_vec();
    dw[40..44].copy_from_slice(&crc);
    let header = common::crc32c(None, &dw[..4092]);
    dw[4092..4096].copy_from_slice(&header.to_le_bytes());
    overwrite(&disk, &path, 0, &dw[..4096 + PAGE_BYTES]);
    match open(&disk, true) {
        Err(Error::Corruption {
            file: f,
            offset,
            what,
        }) => {
            assert_eq!((f, offset), (path, 4096));
            assert!(what.contains("authentication"), "{what}");
        }
        other => panic!("a changed image was trusted: {:?}", other.err()),
    }
}

#[test]
fn an_encrypted_pages_longest_key_is_forty_bytes_shorter() {
    let disk = SimDisk::new(SimConfig::default());
    let longest = |encrypted: bool| {
        let db = Db::open_with_storage(
            Arc::new(disk.clone()),
            &Path::new(DIR).join(format!("{encrypted}")),
            options(encrypted),
        )
        .expect("create");
        let mut txn = db.begin().expect("begin");
        let max = (1..4096)
            .rev()
            .find(|&n| txn.put(&vec![b'k'; n], b"v").is_ok())
            .expect("some key fits");
        drop(txn);
        max
    };
    assert_eq!((longest(false), longest(true)), (995, 985));
}

/// A torn page in place (its crc broken, as a cut write leaves it) whose image is in the
/// last doublewrite batch is restored from that image: the sealed bytes, unchanged.
#[test]
fn a_torn_page_is_restored_from_its_sealed_image() {
    let rows = 600;
    let disk = written(true, rows);
    let id = in_last_batch(&disk)[0];
    let dw = disk.live_contents(&file("doublewrite.tdb")).expect("dw");
    let image = dw[4096..4096 + PAGE_BYTES].to_vec();
    let mut torn = image.clone();
    torn[PAGE_BYTES / 2..].fill(0x5a);
    overwrite(&disk, &file("data.tdb"), id * PAGE_BYTES, &torn);
    all_rows_read(&disk, rows).expect("restored");
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    assert!(
        data[id * PAGE_BYTES..(id + 1) * PAGE_BYTES] == image[..],
        "page {id} is not its image"
    );
}

/// A page changed on purpose (its crc made again) is reported even where the doublewrite
/// batch holds an image that could overwrite it: no tear makes a tag fail under a matching
/// crc, so the evidence is not repaired away.
#[test]
fn a_changed_page_with_an_image_in_the_last_batch_is_reported_not_restored() {
    let disk = written(true, 600);
    let id = in_last_batch(&disk)[0];
    change_page(&disk, id, |page| page[300] ^= 0x01);
    assert_corrupt_page(
        open(&disk, true),
        id,
        "authentication",
        "a changed page was restored over",
    );
}

/// Under full-page images, redo rebuilds a page a crash left unreadable from its image in
/// the log. A page whose tag fails was not left so by a crash: redo reports it.
#[test]
fn redo_reports_a_changed_page_rather_than_rebuild_it_from_its_image() {
    let rows = 600;
    let disk = SimDisk::new(SimConfig::default());
    let options = Options {
        torn_page_guard: TornPageGuard::FullPageImages,
        ..options(true)
    };
    let db = Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options.clone())
        .expect("create");
    let mut txn = db.begin().expect("begin");
    for i in 0..rows {
        txn.put(&key_of(i), &value_of(i)).expect("put");
    }
    txn.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    // The first change of every leaf after the checkpoint logs its image; the process dies
    // before another checkpoint.
    let mut txn = db.begin().expect("begin");
    for i in 0..rows {
        txn.put(&key_of(i), b"changed").expect("put");
    }
    txn.commit().expect("commit");
    disk.crash(tilldb::io::CrashMode::ProcessKill);
    drop(db);
    let data = disk.live_contents(&file("data.tdb")).expect("data");
    let id = (1..data.len() / PAGE_BYTES)
        .rev()
        .find(|&id| data[id * PAGE_BYTES + 4] == 1)
        .expect("a leaf");
    change_page(&disk, id, |page| page[300] ^= 0x01);
    assert_corrupt_page(
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options),
        id,
        "authentication",
        "redo rebuilt over a changed page",
    );
}
