//! `till check`: a healthy database passes; a flipped byte in a page is reported with the
//! file and offset and a failing exit status; a directory without a database is refused;
//! leaked and doubly used pages, and a log chain with a missing or damaged segment, are
//! named with the file and offset.

mod common;

use common::{copy_dir, options, rewrite_header, segments, snapshot, till};
use std::process::Command;
use tilldb::internals::page::PageId;
use tilldb::{Db, FlushMethod, Options};

fn till_check(dir: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .arg("check")
        .arg(dir)
        .output()
        .expect("run till");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn check_passes_a_healthy_database_and_names_a_corrupt_page() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let options = Options {
        flush_method: Some(FlushMethod::Fdatasync),
        page_bytes: Some(4096),
        // The doublewrite area is what repairs the flipped page below.
        torn_page_guard: tilldb::TornPageGuard::Doublewrite,
        // Commits through the tree: the page flipped below holds them.
        write_buffer_bytes: 0,
        ..Options::default()
    };
    {
        let db = Db::open(&dir, options).expect("open");
        let mut txn = db.begin().expect("begin");
        for i in 0..2000u32 {
            txn.put(format!("k{i:05}").as_bytes(), &[1u8; 64])
                .expect("put");
            txn.put_in("other", format!("o{i:05}").as_bytes(), b"x")
                .expect("put");
        }
        txn.commit().expect("commit");
        db.close().expect("close");
    }
    let (ok, text) = till_check(&dir);
    assert!(ok, "{text}");
    assert!(text.contains("check ok"), "{text}");
    assert!(text.contains("table other"), "{text}");
    assert!(text.contains("2000 keys"), "{text}");

    // Flip a byte in page 3's body: the doublewrite area still holds it, and recovery
    // repairs it (in memory: check changes no file, so the page stays damaged on disk until
    // the database itself is opened); check says so.
    let data = dir.join("data.tdb");
    let mut bytes = std::fs::read(&data).expect("read data file");
    bytes[3 * 4096 + 100] ^= 0xFF;
    std::fs::write(&data, &bytes).expect("write data file");
    let (ok, text) = till_check(&dir);
    assert!(ok, "{text}");
    assert!(text.contains("before recovery: bad page"), "{text}");
    assert!(
        text.contains("offset 12288"),
        "the offset of page 3 is named: {text}"
    );
    assert!(text.contains("repaired 1 bad pages"), "{text}");
    assert_eq!(
        std::fs::read(&data).expect("read"),
        bytes,
        "check wrote the repair"
    );

    // The same damage with no second copy: check fails, naming the file and offset.
    let dw = dir.join("doublewrite.tdb");
    let len = std::fs::metadata(&dw).expect("dw").len();
    std::fs::write(&dw, vec![0u8; usize::try_from(len).expect("small")]).expect("wipe dw");
    let (ok, text) = till_check(&dir);
    assert!(!ok, "an unrepairable page passed: {text}");
    assert!(text.contains("12288"), "{text}");
    assert!(text.contains("data.tdb"), "{text}");
}

#[test]
fn check_refuses_a_directory_without_a_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (ok, text) = till_check(tmp.path());
    assert!(!ok);
    assert!(text.contains("no tilldb database"), "{text}");
}

/// A database with free pages, closed cleanly.
fn with_free_pages(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, options()).expect("open");
    for i in 0..30u32 {
        let mut txn = db.begin().expect("begin");
        for j in 0..30u32 {
            txn.put(format!("k{i:04}{j:03}").as_bytes(), &[1u8; 100])
                .expect("put");
        }
        txn.commit().expect("commit");
    }
    for i in 0..20u32 {
        let mut txn = db.begin().expect("begin");
        for j in 0..30u32 {
            txn.delete(format!("k{i:04}{j:03}").as_bytes())
                .expect("delete");
        }
        txn.commit().expect("commit");
    }
    db
}

/// A header that lost its free-list head leaks every free page: check names each with its
/// offset in the data file and fails; a free list pointing into a tree is a doubly used page.
#[test]
fn check_names_leaked_and_doubly_used_pages() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    with_free_pages(&dir).close().expect("close");
    let dir_arg = dir.to_str().expect("utf-8 path");
    let healthy = till(&["check", dir_arg]);
    assert!(healthy.ok, "{}", healthy.text());
    assert!(
        healthy.stdout.contains(" 0 leaked, 0 doubly used"),
        "{}",
        healthy.stdout
    );
    let stats = till(&["stats", "--json", dir_arg]).json();
    let free = stats["pages"]["free_list"].as_u64().expect("free list");
    let head = stats["header"]["free_head"].as_u64().expect("free head");
    assert!(free > 0 && head > 0, "{stats:#}");

    let leaky = tmp.path().join("leaky");
    copy_dir(&dir, &leaky);
    rewrite_header(&leaky, |h| h.free_head = PageId(0));
    let run = till(&["check", leaky.to_str().expect("utf-8 path")]);
    assert!(!run.ok, "a lost free list passed: {}", run.text());
    assert!(
        run.stdout.contains(&format!("{free} leaked")),
        "{}",
        run.stdout
    );
    let data = leaky.join("data.tdb").display().to_string();
    assert!(
        run.stdout.contains(&format!(
            "BAD leaked page {head} in {data} at offset {}",
            head * 4096
        )),
        "the old head is leaked, with its offset: {}",
        run.stdout
    );

    let shared = tmp.path().join("shared");
    copy_dir(&dir, &shared);
    rewrite_header(&shared, |h| h.free_head = PageId(2));
    let run = till(&["check", shared.to_str().expect("utf-8 path")]);
    assert!(!run.ok, "a free list into a tree passed: {}", run.text());
    assert!(
        run.stdout.contains("BAD doubly used page 2")
            && run.stdout.contains("at offset 8192")
            && run
                .stdout
                .contains("the default table and by the free list"),
        "{}",
        run.stdout
    );
}

/// A crash image whose log spans segments: with a middle segment deleted, or its header
/// damaged, check fails naming the segment file and offset; intact, it passes.
#[test]
fn check_names_a_broken_log_chain() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let image = tmp.path().join("image");
    let db = with_free_pages(&dir);
    // Enough log to span segments: it grows by the records alone.
    for i in 0..40u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("fill{i:02}").as_bytes(), &[2u8; 4_000])
            .expect("put");
        txn.commit().expect("commit");
    }
    // The spare segment is prepared in the background: wait for it before taking the image
    // (the copy once raced it and held three files).
    let started = std::time::Instant::now();
    while segments(&dir).len() < 4 && started.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    copy_dir(&dir, &image);
    db.close().expect("close");
    let chain = segments(&image);
    assert!(chain.len() >= 4, "the log spans segments: {chain:?}");

    // A crash image: check recovers it in memory, and every file stays byte-identical.
    let intact = tmp.path().join("intact");
    copy_dir(&image, &intact);
    let before = snapshot(&intact);
    let run = till(&["check", intact.to_str().expect("utf-8 path")]);
    assert!(run.ok, "{}", run.text());
    assert!(run.stdout.contains("log ends cleanly"), "{}", run.stdout);
    assert!(snapshot(&intact) == before, "till check changed a file");

    let gap = tmp.path().join("gap");
    copy_dir(&image, &gap);
    let missing = gap.join("wal").join(chain[1].file_name().expect("name"));
    std::fs::remove_file(&missing).expect("remove a segment");
    let before = snapshot(&gap);
    let run = till(&["check", gap.to_str().expect("utf-8 path")]);
    assert!(!run.ok, "a missing segment passed: {}", run.text());
    assert!(
        snapshot(&gap) == before,
        "till check changed a damaged copy"
    );
    let before = gap.join("wal").join(chain[0].file_name().expect("name"));
    let len = std::fs::metadata(&before).expect("segment").len();
    assert!(
        run.stdout.contains(&format!(
            "BAD log: corrupt {} at offset {len}: the log continues past this segment, but the \
             next segment is missing",
            before.display()
        )),
        "{}",
        run.stdout
    );

    // Issue 24: the oldest segment, holding the checkpoint's redo point, removed. The log
    // that is left starts after the checkpoint: loss, reported, never a clean open.
    let headless = tmp.path().join("headless");
    copy_dir(&image, &headless);
    let oldest = headless
        .join("wal")
        .join(chain[0].file_name().expect("name"));
    std::fs::remove_file(&oldest).expect("remove the oldest segment");
    let run = till(&["check", headless.to_str().expect("utf-8 path")]);
    assert!(
        !run.ok,
        "a log starting after its checkpoint passed: {}",
        run.text()
    );
    assert!(
        run.stdout.contains("BAD log: the checkpoint"),
        "{}",
        run.text()
    );
    let next = headless
        .join("wal")
        .join(chain[1].file_name().expect("name"));
    assert!(
        run.stderr.contains(&format!(
            "corrupt {} at offset 0: log records from lsn",
            next.display()
        )) && run.stderr.contains("are missing"),
        "{}",
        run.text()
    );

    let damaged = tmp.path().join("damaged");
    copy_dir(&image, &damaged);
    let victim = damaged
        .join("wal")
        .join(chain[1].file_name().expect("name"));
    let mut bytes = std::fs::read(&victim).expect("segment");
    bytes[20] ^= 0xFF;
    std::fs::write(&victim, &bytes).expect("write segment");
    let run = till(&["check", damaged.to_str().expect("utf-8 path")]);
    assert!(!run.ok, "a damaged segment header passed: {}", run.text());
    assert!(
        run.stdout.contains(&format!(
            "BAD log: corrupt {} at offset 40: log segment header checksum mismatch",
            victim.display()
        )),
        "{}",
        run.stdout
    );
}

/// Issue 23: `till check` on a damaged copy (a truncated data file) used to exit 1 and also
/// rewrite the header and recycle log segments, through the clean-shutdown write of the
/// database it opened. It recovers in memory now: every file stays byte-identical, damaged or
/// healthy, and a healthy copy's check still passes.
#[test]
fn check_changes_no_byte_of_a_damaged_or_healthy_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = with_free_pages(&dir);
    let image = tmp.path().join("image");
    copy_dir(&dir, &image);
    db.close().expect("close");
    for (name, damage) in [
        ("healthy crash image", None),
        ("data file cut in half", Some("data.tdb")),
    ] {
        let copy = tmp.path().join(name.replace(' ', "-"));
        copy_dir(&image, &copy);
        if let Some(file) = damage {
            let path = copy.join(file);
            let len = std::fs::metadata(&path).expect("stat").len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open")
                .set_len(len / 2)
                .expect("truncate");
        }
        let before = snapshot(&copy);
        let run = till(&["check", copy.to_str().expect("utf-8 path")]);
        assert_eq!(run.ok, damage.is_none(), "{name}: {}", run.text());
        assert!(
            snapshot(&copy) == before,
            "{name}: till check changed a file"
        );
    }
}
