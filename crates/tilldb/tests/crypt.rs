//! Encryption at rest, piece 1 (docs/encryption.md): the application's key wraps the data
//! key, and a wrong key is `WrongKey`, never a data key made of whatever the unwrap produced
//! (mutant `key-wrap-unchecked`: a database opened with it would be sealed under garbage).
//! The ciphers' vectors and the backends' agreement are unit tests (`src/crypt/tests.rs`).

use tilldb::internals::crypt::{DataKey, KeyError, KeyProvider, StaticKey};

#[test]
fn a_wrong_application_key_unwraps_a_data_key_of_garbage() {
    let right = StaticKey::new(&[0x11; 32]);
    let wrong = StaticKey::new(&[0x22; 32]);
    let data_key = DataKey::generate().expect("the OS's randomness");
    let wrapped = right.wrap(&data_key, b"database 1").expect("wrap");
    match wrong.unwrap(&wrapped, b"database 1") {
        Err(KeyError::WrongKey) => {}
        Ok(key) => panic!(
            "a wrong key unwrapped a data key ({}the right one)",
            if key.bytes() == data_key.bytes() {
                ""
            } else {
                "not "
            }
        ),
        Err(other) => panic!("a wrong key is WrongKey, not {other}"),
    }
    match right.unwrap(&wrapped, b"database 2") {
        Err(KeyError::WrongKey) => {}
        other => panic!("a wrap moved to another database opened: {other:?}"),
    }
    // The right key and context give the data key back, and what it sealed opens.
    let unwrapped = right
        .unwrap(&wrapped, b"database 1")
        .expect("the right key");
    assert!(
        unwrapped.bytes() == data_key.bytes(),
        "the unwrapped data key is another key"
    );
}
