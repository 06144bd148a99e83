//! `till check`: a healthy database passes; a flipped byte in a page is reported with the
//! file and offset and a failing exit status; a directory without a database is refused.

use std::process::Command;
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
        page_bytes: 4096,
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
    // repairs it; check says so.
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

    // The same damage with no second copy: check fails, naming the file and offset.
    let mut bytes = std::fs::read(&data).expect("read data file");
    bytes[3 * 4096 + 100] ^= 0xFF;
    std::fs::write(&data, &bytes).expect("write data file");
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
