//! The ciphers against published vectors, the two backends against each other, tampering,
//! the wrap, and keys that never print.

use super::aead::derive_bytes;
use super::cipher::{Backend, Cipher, KEY_BYTES};
use super::rustcrypto::RustCryptoKey;
use super::{DataKey, KeyError, KeyProvider, Mismatch, SealKey, StaticKey};
use zeroize::Zeroizing;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn key32(bytes: &[u8]) -> [u8; KEY_BYTES] {
    bytes.try_into().expect("32 bytes")
}

fn nonce12(bytes: &[u8]) -> [u8; 12] {
    bytes.try_into().expect("12 bytes")
}

/// Seals `plain` with each backend of the build and checks the ciphertext's start and the tag.
fn check_vector(
    cipher: Cipher,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    plain: &[u8],
    sealed_start: &[u8],
    tag: &[u8],
) {
    let (key, nonce) = (key32(key), nonce12(nonce));
    let platform = SealKey::new(cipher, &key);
    let rustcrypto = RustCryptoKey::new(cipher, &key);
    for name in ["platform", "rustcrypto"] {
        let mut buf = plain.to_vec();
        let got = if name == "platform" {
            platform.seal(nonce, aad, &mut buf)
        } else {
            rustcrypto.seal(nonce, aad, &mut buf)
        };
        assert_eq!(
            &buf[..sealed_start.len()],
            sealed_start,
            "{cipher:?} {name}: ciphertext"
        );
        assert_eq!(got.as_slice(), tag, "{cipher:?} {name}: tag");
        let mut opened = buf.clone();
        platform
            .open(nonce, aad, &mut opened, &got)
            .expect("the platform backend opens it");
        assert_eq!(opened, plain);
        let mut opened = buf;
        rustcrypto
            .open(nonce, aad, &mut opened, &got)
            .expect("the RustCrypto backend opens it");
        assert_eq!(opened, plain);
    }
}

#[test]
fn aes_256_gcm_seals_as_the_gcm_specification_says() {
    // McGrew and Viega, "The Galois/Counter Mode of Operation", test case 16.
    check_vector(
        Cipher::Aes256Gcm,
        &hex("feffe9928665731c6d6a8f9467308308 feffe9928665731c6d6a8f9467308308"),
        &hex("cafebabefacedbaddecaf888"),
        &hex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
        &hex(
            "d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72 \
             1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b39",
        ),
        &hex(
            "522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa \
             8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662",
        ),
        &hex("76fc6ece0f4e1768cddf8853bb2d551b"),
    );
}

#[test]
fn chacha20_poly1305_seals_as_rfc_8439_says() {
    // RFC 8439, section 2.8.2.
    let key: Vec<u8> = (0x80..=0x9f).collect();
    check_vector(
        Cipher::ChaCha20Poly1305,
        &key,
        &hex("070000004041424344454647"),
        &hex("50515253c0c1c2c3c4c5c6c7"),
        b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for \
          the future, sunscreen would be it.",
        &hex("d31a8d34648e60db7b86afbc53ef7ec2"),
        &hex("1ae10b594f09e26a7e902ecbd0600691"),
    );
}

#[test]
fn hkdf_derives_as_rfc_5869_says() {
    // RFC 5869, test case 1: the first 32 of its 42 bytes.
    let want = hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
    let (ikm, salt, info) = (
        [0x0bu8; 22],
        hex("000102030405060708090a0b0c"),
        hex("f0f1f2f3f4f5f6f7f8f9"),
    );
    let mut out = [0u8; KEY_BYTES];
    derive_bytes(&ikm, &salt, &[&info[..4], &info[4..]], &mut out);
    assert_eq!(out.as_slice(), want, "the platform backend");
    RustCryptoKey::hkdf(&ikm, &salt, &[&info], &mut out);
    assert_eq!(out.as_slice(), want, "RustCrypto");
}

/// A small deterministic generator of the test's keys, nonces and bytes.
fn byte(state: &mut u64) -> u8 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    state.to_le_bytes()[0]
}

#[test]
fn both_backends_seal_the_same_bytes_and_open_each_others() {
    let mut state = 0x5eed_u64;
    for round in 0..200 {
        let cipher = if round % 2 == 0 {
            Cipher::Aes256Gcm
        } else {
            Cipher::ChaCha20Poly1305
        };
        let mut key = [0u8; KEY_BYTES];
        for b in &mut key {
            *b = byte(&mut state);
        }
        let mut nonce = [0u8; 12];
        for b in &mut nonce {
            *b = byte(&mut state);
        }
        // Sizes of records and pages, the odd ones included.
        let len = [0, 1, 15, 16, 17, 200, 4096, 16_384][round % 8];
        let plain: Vec<u8> = (0..len).map(|_| byte(&mut state)).collect();
        let aad: Vec<u8> = (0..round % 40).map(|_| byte(&mut state)).collect();
        let platform = SealKey::new(cipher, &key);
        let rustcrypto = RustCryptoKey::new(cipher, &key);
        let (mut a, mut b) = (plain.clone(), plain.clone());
        let tag_a = platform.seal(nonce, &aad, &mut a);
        let tag_b = rustcrypto.seal(nonce, &aad, &mut b);
        assert_eq!(
            (&a, tag_a),
            (&b, tag_b),
            "round {round}: {cipher:?}, {len} bytes"
        );
        rustcrypto
            .open(nonce, &aad, &mut a, &tag_a)
            .expect("RustCrypto opens ring's");
        platform
            .open(nonce, &aad, &mut b, &tag_b)
            .expect("the platform opens RustCrypto's");
        assert_eq!((a, b), (plain.clone(), plain));
    }
}

#[test]
fn a_flipped_bit_in_the_bytes_the_tag_the_nonce_or_the_associated_data_is_a_mismatch() {
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        let key = SealKey::new(cipher, &[7; KEY_BYTES]);
        let nonce = [3u8; 12];
        let aad = b"page 42".to_vec();
        let mut sealed = b"a sale of 12.50 to Mrs Smith".to_vec();
        let tag = key.seal(nonce, &aad, &mut sealed);
        for bit in 0..sealed.len() * 8 {
            let mut buf = sealed.clone();
            buf[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                key.open(nonce, &aad, &mut buf, &tag),
                Err(Mismatch),
                "{cipher:?} bit {bit}"
            );
        }
        for bit in 0..128 {
            let mut bad = tag;
            bad[bit / 8] ^= 1 << (bit % 8);
            let mut buf = sealed.clone();
            assert_eq!(
                key.open(nonce, &aad, &mut buf, &bad),
                Err(Mismatch),
                "tag bit {bit}"
            );
        }
        for bit in 0..96 {
            let mut bad = nonce;
            bad[bit / 8] ^= 1 << (bit % 8);
            let mut buf = sealed.clone();
            assert_eq!(
                key.open(bad, &aad, &mut buf, &tag),
                Err(Mismatch),
                "nonce bit {bit}"
            );
        }
        for bit in 0..aad.len() * 8 {
            let mut bad = aad.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let mut buf = sealed.clone();
            assert_eq!(
                key.open(nonce, &bad, &mut buf, &tag),
                Err(Mismatch),
                "aad bit {bit}"
            );
        }
        let other = SealKey::new(cipher, &[8; KEY_BYTES]);
        let mut buf = sealed.clone();
        assert_eq!(
            other.open(nonce, &aad, &mut buf, &tag),
            Err(Mismatch),
            "another key"
        );
        let mut buf = sealed;
        key.open(nonce, &aad, &mut buf, &tag)
            .expect("untouched, it opens");
        assert_eq!(buf, b"a sale of 12.50 to Mrs Smith");
    }
}

#[test]
fn keys_derived_with_other_salts_or_purposes_differ() {
    let data_key = DataKey::from_bytes(Zeroizing::new([9; KEY_BYTES]));
    let seal = |salt: &[u8], info: &[&[u8]]| {
        let mut buf = [0u8; 32];
        let tag = data_key
            .derive(Cipher::Aes256Gcm, salt, info)
            .seal([0; 12], b"", &mut buf);
        (buf, tag)
    };
    let base = seal(b"salt one", &[b"tilldb page 1"]);
    assert_eq!(
        base,
        seal(b"salt one", &[b"tilldb page 1"]),
        "derivation is deterministic"
    );
    assert_ne!(base, seal(b"salt two", &[b"tilldb page 1"]));
    assert_ne!(base, seal(b"salt one", &[b"tilldb wal 1"]));
}

#[test]
fn a_wrapped_data_key_opens_only_with_its_key_and_its_context() {
    let kek = StaticKey::new(&[1; KEY_BYTES]);
    let data_key = DataKey::generate().expect("random");
    let wrapped = kek.wrap(&data_key, b"db one").expect("wrap");
    assert_eq!(wrapped.len(), 61);
    let opened = kek
        .unwrap(&wrapped, b"db one")
        .expect("its own key opens it");
    assert_eq!(opened.bytes(), data_key.bytes());
    // Two wraps of one key share nothing but the version: a fresh nonce each.
    let again = kek.wrap(&data_key, b"db one").expect("wrap");
    assert_ne!(wrapped[1..], again[1..]);
    assert!(matches!(
        StaticKey::new(&[2; KEY_BYTES]).unwrap(&wrapped, b"db one"),
        Err(KeyError::WrongKey)
    ));
    assert!(matches!(
        kek.unwrap(&wrapped, b"db two"),
        Err(KeyError::WrongKey)
    ));
    for bit in 8..wrapped.len() * 8 {
        let mut bad = wrapped.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            matches!(kek.unwrap(&bad, b"db one"), Err(KeyError::WrongKey)),
            "bit {bit} flipped"
        );
    }
    let mut bad = wrapped.clone();
    bad[0] = 2;
    assert!(matches!(
        kek.unwrap(&bad, b"db one"),
        Err(KeyError::Malformed(_))
    ));
    assert!(matches!(
        kek.unwrap(&wrapped[..60], b"db one"),
        Err(KeyError::Malformed(_))
    ));
}

#[test]
fn key_ids_tell_keys_apart_and_give_nothing_of_them_away() {
    let a = StaticKey::new(&[1; KEY_BYTES]);
    assert_eq!(a.key_id(), StaticKey::new(&[1; KEY_BYTES]).key_id());
    assert_ne!(a.key_id(), StaticKey::new(&[2; KEY_BYTES]).key_id());
    assert!(
        a.key_id().starts_with("kek:") && a.key_id().len() == 20,
        "{}",
        a.key_id()
    );
    assert_eq!(
        StaticKey::with_id(&[1; KEY_BYTES], "till 7".into()).key_id(),
        "till 7"
    );
}

#[test]
fn no_key_prints_its_bytes() {
    let bytes = [0xab; KEY_BYTES];
    let printed = [
        format!("{:?}", DataKey::from_bytes(Zeroizing::new(bytes))),
        format!("{:?}", StaticKey::new(&bytes)),
        format!("{:?}", SealKey::new(Cipher::Aes256Gcm, &bytes)),
    ];
    for text in printed {
        assert!(
            !text.contains("ab, ") && !text.contains("abab") && !text.contains("171"),
            "{text}"
        );
    }
}

#[test]
fn cipher_codes_round_trip() {
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        assert_eq!(Cipher::from_code(cipher.code()), Some(cipher));
    }
    assert_eq!(Cipher::from_code(0), None);
    assert_eq!(Cipher::from_code(3), None);
}
