//! Issue 53: `till ship` reads an encrypted till's feed with the till's key (`--key-file`, as
//! every command takes it): without it nothing is shipped and the refusal names the key the
//! till wants; with it every sale arrives once, and later sales follow exactly once.

use super::never_silent::{consumer_position, count, ship_once, watermark_of};
use super::*;

#[test]
fn an_encrypted_tills_sales_ship_exactly_once_with_its_key_and_not_without() {
    let test = "an_encrypted_tills_sales_ship_exactly_once_with_its_key_and_not_without";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    pg.client()
        .batch_execute("CREATE DATABASE headoffice_enc")
        .expect("create the head office");
    let url = pg.url_of("headoffice_enc");
    let mut client_enc = Client::connect(&url, postgres::NoTls).expect("connect");
    audit_applications(&mut client_enc);
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = work.path().join("t1");
    let key = [0x5a_u8; 32];
    let key_file = work.path().join("till.key");
    std::fs::write(&key_file, key).expect("key file");
    let (d, k) = (
        dir.to_str().expect("utf-8"),
        key_file.to_str().expect("utf-8"),
    );
    let sales = |n: u32| {
        let run = till(&["demo", d, "--sales", &n.to_string(), "--key-file", k]);
        assert!(run.ok, "till demo: {}", run.text());
    };
    sales(150);

    let refused = ship_once(&dir, &url, "enc", &[]);
    assert_ne!(refused.code, Some(0), "{}", refused.text);
    assert!(refused.text.contains("kek:"), "{}", refused.text);
    assert!(
        pg_rows(&mut client_enc, "tilldb_sales", "enc").is_empty(),
        "shipped without the key"
    );

    let options = Options {
        change_feed: true,
        encryption: Some(tilldb::Encryption::with_key(&key)),
        ..Options::default()
    };
    for round in 0..2 {
        let shipped = ship_once(&dir, &url, "enc", &["--key-file", k]);
        assert_eq!(shipped.code, Some(0), "round {round}: {}", shipped.text);
        let db = Db::open(&dir, options.clone()).expect("the till opens with its key");
        for table in ["sales", "totals"] {
            let till_rows = db_rows(&db, table);
            let pg = pg_rows(&mut client_enc, &format!("tilldb_{table}"), "enc");
            assert!(!till_rows.is_empty(), "{table}: no rows");
            assert!(
                pg == till_rows,
                "round {round}, {table}: PostgreSQL differs"
            );
        }
        db.close().expect("close");
        let watermark = watermark_of(&mut client_enc, "enc").expect("a watermark");
        assert_eq!(
            u64::try_from(watermark).expect("lsn"),
            consumer_position(&dir)
        );
        sales(60);
    }
    let repeated = count(
        &mut client_enc,
        "SELECT count(*) FROM (SELECT 1 FROM audit GROUP BY tbl, till_id, key, lsn
         HAVING count(*) > 1) AS twice",
    );
    assert_eq!(repeated, 0, "row writes applied more than once");
}
