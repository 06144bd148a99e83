//! The application's key kept by the OS (`OsKeyStore`, docs/encryption.md section 4): on
//! Windows DPAPI wraps the data key, and the database opens for the same user or machine with
//! the same scope, and with no other key; the wrap is bound to its database (DPAPI's entropy)
//! and a changed byte does not unwrap. Elsewhere there is no key store: creating a database
//! with it is `KeyUnavailable`, saying so. Run under Wine by `scripts/test`.

#[cfg(windows)]
use tilldb::{DataKey, KeyError};
use tilldb::{Db, Encryption, Error, KeyProvider, OsKeyScope, OsKeyStore};

fn options(provider: impl KeyProvider + 'static) -> tilldb::Options {
    tilldb::Options {
        encryption: Some(Encryption::new(std::sync::Arc::new(provider))),
        ..tilldb::Options::for_tests()
    }
}

#[test]
fn the_os_key_store_is_dpapi_on_windows_and_none_elsewhere() {
    assert_eq!(
        OsKeyStore::available(),
        cfg!(windows).then_some("DPAPI"),
        "the platform module's key store"
    );
}

#[cfg(not(windows))]
#[test]
fn without_an_os_key_store_a_database_is_refused_as_key_unavailable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    match Db::open(&dir, options(OsKeyStore::new(OsKeyScope::Machine))) {
        Err(e @ Error::KeyUnavailable { .. }) => {
            assert!(e.to_string().contains("no OS key store"), "{e}");
        }
        other => panic!("expected KeyUnavailable, got {other:?}"),
    }
}

#[cfg(windows)]
#[test]
fn a_database_wrapped_by_dpapi_opens_with_its_scope_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let machine = || options(OsKeyStore::new(OsKeyScope::Machine));
    let db = Db::open(&dir, machine()).expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"receipt-1", b"12.50").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    let db = Db::open(&dir, machine()).expect("reopen with DPAPI");
    assert_eq!(
        db.get(b"receipt-1").expect("get").as_deref(),
        Some(&b"12.50"[..])
    );
    db.close().expect("close");
    for other in [
        options(OsKeyStore::new(OsKeyScope::User)),
        options(tilldb::StaticKey::new(&[9; 32])),
    ] {
        assert!(matches!(Db::open(&dir, other), Err(Error::WrongKey { .. })));
    }
}

#[cfg(windows)]
#[test]
fn a_dpapi_wrap_is_bound_to_its_database_and_its_bytes() {
    let data_key = DataKey::generate().expect("random");
    for scope in [OsKeyScope::User, OsKeyScope::Machine] {
        let store = OsKeyStore::new(scope);
        let wrapped = store.wrap(&data_key, b"database one").expect("wrap");
        assert!(
            !wrapped.windows(32).any(|w| w == data_key.bytes()),
            "the data key in clear"
        );
        let back = store.unwrap(&wrapped, b"database one").expect("unwrap");
        assert_eq!(back.bytes(), data_key.bytes());
        assert!(matches!(
            store.unwrap(&wrapped, b"database two"),
            Err(KeyError::WrongKey)
        ));
        let mut changed = wrapped.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        assert!(matches!(
            store.unwrap(&changed, b"database one"),
            Err(KeyError::WrongKey)
        ));
    }
}
