//! The change feed of an encrypted database (docs/encryption.md, piece 7): its commit
//! records, writes included, are sealed in the log, and a feed opened with the key
//! (`Feed::open_consumer_encrypted`) returns every committed transaction with its writes, in
//! order, as from a plain database. Without the key the feed is `KeyRequired`, with another
//! `WrongKey`, and neither registers the consumer. No log file holds a key or value written.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tilldb::feed::{Change, Feed};
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::io::{FileStorage, Storage};
use tilldb::{Db, Error, Options};

const MARKER: &str = "MARKER-f33d";

fn encryption(key: [u8; 32]) -> Encryption {
    Encryption {
        provider: Arc::new(StaticKey::new(&key)),
        cipher: Cipher::Aes256Gcm,
    }
}

fn options() -> Options {
    Options {
        change_feed: true,
        encryption: Some(encryption([0x51; 32])),
        ..Options::for_tests()
    }
}

fn storage() -> Arc<dyn Storage> {
    Arc::new(FileStorage::new())
}

#[test]
fn an_encrypted_databases_feed_reads_its_sealed_commits_with_the_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let db = Db::open(dir, options()).expect("create");
    let key = encryption([0x51; 32]);
    for (refused, name) in [(None, "nokey"), (Some(encryption([0x52; 32])), "wrongkey")] {
        match Feed::open_consumer_encrypted(storage(), dir, name, refused.as_ref()) {
            Err(Error::KeyRequired { .. } | Error::WrongKey { .. }) => {}
            Err(e) => panic!("{name}: {e:?}"),
            Ok(_) => panic!("{name}: the feed opened"),
        }
    }
    let mut feed =
        Feed::open_consumer_encrypted(storage(), dir, "shipper", Some(&key)).expect("register");
    for i in 0..300u32 {
        let mut txn = db.begin().expect("begin");
        txn.put_in(
            "sales",
            format!("{MARKER}-{i:04}").as_bytes(),
            format!("{MARKER}-total-{i}").as_bytes(),
        )
        .expect("put");
        txn.commit().expect("commit");
    }
    let mut got = Vec::new();
    while let Some(txn) = feed.next(Duration::from_millis(100)).expect("feed") {
        got.push(txn);
    }
    assert_eq!(got.len(), 300);
    for (i, txn) in (0..).zip(&got) {
        assert_eq!(
            txn.changes,
            vec![Change {
                table: "sales".into(),
                key: format!("{MARKER}-{i:04}").into_bytes(),
                value: Some(format!("{MARKER}-total-{i}").into_bytes()),
            }],
            "transaction {i}"
        );
    }
    feed.acknowledge(got.last().expect("some").lsn)
        .expect("ack");
    db.close().expect("close");
    let consumers = tilldb::feed::consumers(dir).expect("consumers");
    let names: Vec<_> = consumers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["shipper"], "a refused open registered a consumer");
    for entry in std::fs::read_dir(dir.join("wal")).expect("wal") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("segment");
        assert!(
            !bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
            "a log segment holds plaintext"
        );
    }
    assert!(Path::new(&dir.join("feed")).is_dir());
}
