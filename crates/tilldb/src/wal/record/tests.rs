//! The record format's tests: golden bytes, every fault, sealed records.

use super::*;

/// Issue 24: the checksum alone must reject any change of the length and lsn fields (a
/// checksum that skipped them was caught only by a golden test, since the lsn check
/// happens to catch some of it). Each bit is flipped in turn and the record decoded with
/// 1 MiB of segment after it: the only answers allowed are `BadCrc`, or `BadLen` for a
/// length no record can have there (the length check runs first). `WrongLsn` would mean
/// the checksum let an lsn change through.
#[test]
fn the_checksum_alone_rejects_every_flipped_bit_of_len_and_lsn() {
    let generation = 9;
    let lsn = 1 << 20;
    let mut segment = vec![0u8; 1 << 20];
    let len = encode(&mut segment, generation, lsn, RecordKind::Data, b"payload!");
    let mut reached_crc = 0;
    for byte in LEN_OFFSET..KIND_OFFSET {
        for bit in 0..8 {
            let mut flipped = segment.clone();
            flipped[byte] ^= 1 << bit;
            let new_len = u32_at(&flipped, LEN_OFFSET) as usize;
            match decode(&flipped, generation, lsn) {
                Err(RecordFault::BadCrc) => reached_crc += 1,
                Err(RecordFault::Zero) => assert_eq!(new_len, 0),
                Err(RecordFault::BadLen) => assert!(
                    new_len < HEADER_BYTES
                        || !new_len.is_multiple_of(ALIGN_BYTES)
                        || new_len > flipped.len(),
                    "bit {bit} of byte {byte}: BadLen for a possible length {new_len}"
                ),
                other => panic!("bit {bit} of byte {byte} (len {len}): {other:?}"),
            }
        }
    }
    // Every lsn bit, and every len bit that leaves a possible length (bits 3..=19 but
    // bit 5, which turns 32 into 0), reach the checksum.
    assert_eq!(len, 32);
    assert_eq!(reached_crc, 64 + 16);
}

/// Issue 24: the checksum is seeded with the segment's generation, so a record left in a
/// recycled segment never validates in the new one: the checksum alone says so.
#[test]
fn the_checksum_alone_rejects_a_record_of_another_generation() {
    let mut rec = [0u8; 64];
    let len = encode(&mut rec, 9, 4096, RecordKind::Data, b"payload!");
    for other in [0, 8, 10, 9 | 1 << 40] {
        assert_eq!(
            decode(&rec[..len], other, 4096),
            Err(RecordFault::BadCrc),
            "a generation-9 record read in generation {other}"
        );
    }
    assert!(decode(&rec[..len], 9, 4096).is_ok());
}

/// A pad carries its durable mark in the first 8 payload bytes, zeros after, and
/// decodes like any record.
#[test]
fn a_pad_round_trips_its_durable_mark() {
    let mut buf = vec![0xEE; 512];
    encode_pad(&mut buf, (7, None), 4096, 488, 0x0102_0304_0506);
    let rec = decode(&buf, 7, 4096).expect("valid");
    assert_eq!((rec.kind, rec.len), (RecordKind::Pad, 488));
    assert_eq!(pad_durable_mark(rec.payload), 0x0102_0304_0506);
    assert!(rec.payload[8..].iter().all(|&b| b == 0));
    assert_eq!(pad_durable_mark(&[]), 0, "a short payload has no mark");
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Golden bytes: if this changes, the log format changed, and the version must be bumped.
/// The checksum was cross-checked with an independent bitwise CRC32C (poly 0x82F63B78).
#[test]
fn golden_data_record() {
    let mut buf = [0xEEu8; 40];
    let len = encode(&mut buf, 3, 4096, RecordKind::Data, b"hello");
    assert_eq!(len, 32);
    assert_eq!(
        hex(&buf[..len]),
        "22 ad 9f fb 20 00 00 00 00 10 00 00 00 00 00 00 01 00 00 00 05 00 00 00 \
         68 65 6c 6c 6f 00 00 00"
    );
    assert_eq!(&buf[len..], &[0xEE; 8], "encode wrote past the record");
}

#[test]
fn round_trip_every_payload_length_up_to_64() {
    for n in 0..=64usize {
        let payload: Vec<u8> = (0..n)
            .map(|i| u8::try_from(i % 251).expect("small"))
            .collect();
        let mut buf = vec![0u8; record_len(n) + 16];
        let len = encode(&mut buf, 9, 777, RecordKind::Data, &payload);
        assert_eq!(len % ALIGN_BYTES, 0);
        let rec = decode(&buf, 9, 777).expect("valid");
        assert_eq!(
            (rec.lsn, rec.kind, rec.payload, rec.len),
            (777, RecordKind::Data, &payload[..], len)
        );
    }
}

#[test]
fn every_fault_is_detected() {
    let mut buf = vec![0u8; 64];
    let len = encode(&mut buf, 5, 100, RecordKind::Data, b"payload!");
    assert_eq!(
        decode(&buf[..HEADER_BYTES - 1], 5, 100),
        Err(RecordFault::Truncated)
    );
    assert_eq!(decode(&buf[..len - 8], 5, 100), Err(RecordFault::BadLen));
    assert_eq!(decode(&[0u8; 64], 5, 100), Err(RecordFault::Zero));
    assert_eq!(
        decode(&buf, 6, 100),
        Err(RecordFault::BadCrc),
        "stale generation"
    );
    assert_eq!(decode(&buf, 5, 108), Err(RecordFault::WrongLsn));
    for bit in 0..len * 8 {
        let mut flipped = buf.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(
            decode(&flipped, 5, 100).is_err(),
            "bit {bit} flip undetected"
        );
    }
}

#[test]
fn segment_end_has_no_payload() {
    let mut buf = [0u8; HEADER_BYTES];
    assert_eq!(
        encode(&mut buf, 1, 0, RecordKind::SegmentEnd, &[]),
        HEADER_BYTES
    );
    let rec = decode(&buf, 1, 0).expect("valid");
    assert_eq!(rec.kind, RecordKind::SegmentEnd);
    assert!(rec.payload.is_empty());
}

fn sealing_keys() -> (RecordSealer, RecordOpener) {
    use crate::crypt::{Cipher, DataKey, DatabaseKeys, KEY_BYTES};
    let keys = DatabaseKeys::new(
        Cipher::Aes256Gcm,
        [4; 16],
        DataKey::from_bytes(zeroize::Zeroizing::new([6; KEY_BYTES])),
    );
    let salt = [8; crate::crypt::SEGMENT_SALT_BYTES];
    (
        RecordSealer::new(&keys, &salt, 9),
        RecordOpener::new(&keys, &salt, 9),
    )
}

#[test]
fn a_sealed_record_opens_to_its_payload_and_holds_none_of_it() {
    let (sealer, opener) = sealing_keys();
    let payload = b"receipt 7: 2 coffees, 1 loaf".as_slice();
    let mut buf = vec![0u8; 256];
    let len = encode_sealed(&mut buf, 9, 4096, payload, &sealer);
    assert_eq!(len, data_record_len(payload.len(), true));
    assert_eq!(len, record_len(payload.len() + TAG_BYTES));
    assert!(
        !buf.windows(8).any(|w| payload.windows(8).any(|p| p == w)),
        "no 8 bytes of the payload in the sealed record"
    );
    // Without the key: the framing and the crc check out, the payload stays sealed.
    let rec = decode_in(&buf, 9, 4096, true).expect("valid framing");
    assert!(rec.sealed.is_some());
    assert_eq!(rec.payload.len(), payload.len());
    assert_ne!(rec.payload, payload);
    // A sealed record's length is not a plain one's.
    assert_eq!(decode(&buf, 9, 4096), Err(RecordFault::BadHeader));
    let mut plain = Vec::new();
    let shown = open(rec, &opener, &mut plain).expect("opens");
    assert_eq!(shown.payload, payload);
    assert_eq!((shown.lsn, shown.len, shown.sealed), (4096, len, None));
}

#[test]
fn every_flipped_bit_of_a_sealed_record_with_its_crc_made_again_fails() {
    // The crc catches a torn record; with it made again (a change on purpose), the tag
    // catches any change of the length, lsn, kind, payload length, ciphertext or tag:
    // each flip is refused by the framing or by the tag, never opened. (The zeros after
    // the tag are padding no reader uses.)
    let (sealer, opener) = sealing_keys();
    let mut good = vec![0u8; 128];
    let payload = b"a sale of 3 items";
    let len = encode_sealed(&mut good, 9, 4096, payload, &sealer);
    let tag_end = HEADER_BYTES + payload.len() + TAG_BYTES;
    for bit in (LEN_OFFSET * 8)..(tag_end * 8) {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        let crc = crc32c_seeded(9, &[&bad[LEN_OFFSET..len]]);
        bad[..LEN_OFFSET].copy_from_slice(&crc.to_le_bytes());
        let mut plain = Vec::new();
        let result = decode_in(&bad, 9, 4096, true)
            .and_then(|rec| open(rec, &opener, &mut plain).map(|r| r.payload.to_vec()));
        assert!(result.is_err(), "bit {bit} opened: {result:?}");
    }
}

#[test]
fn a_sealed_data_record_turned_into_a_pad_fails_its_tag() {
    // The review's case: kind 1 -> 3 and the payload length grown by the tag, the crc made
    // again. A pad is tagged too, so the change is refused, not skipped.
    let (sealer, opener) = sealing_keys();
    let mut buf = vec![0u8; 128];
    let len = encode_sealed(&mut buf, 9, 4096, b"the sale to lose", &sealer);
    buf[KIND_OFFSET] = RecordKind::Pad as u8;
    let payload_len = u32_at(&buf, PAYLOAD_LEN_OFFSET) + u32::try_from(TAG_BYTES).expect("16");
    buf[PAYLOAD_LEN_OFFSET..HEADER_BYTES].copy_from_slice(&payload_len.to_le_bytes());
    let crc = crc32c_seeded(9, &[&buf[LEN_OFFSET..len]]);
    buf[..LEN_OFFSET].copy_from_slice(&crc.to_le_bytes());
    match decode_in(&buf, 9, 4096, true) {
        Err(_) => {}
        Ok(rec) => {
            let mut plain = Vec::new();
            assert_eq!(
                open(rec, &opener, &mut plain).map(|r| r.kind),
                Err(RecordFault::BadTag)
            );
        }
    }
}

#[test]
fn sealed_pads_and_segment_ends_keep_their_marks_plain_and_open() {
    let (sealer, opener) = sealing_keys();
    let mut buf = vec![0u8; 512];
    encode_pad(&mut buf, (9, Some(&sealer)), 4096, 64, 0x0102_0304);
    let rec = decode_in(&buf, 9, 4096, true).expect("a valid pad");
    assert_eq!(
        pad_durable_mark(rec.payload),
        0x0102_0304,
        "readable without a key"
    );
    let mut plain = Vec::new();
    assert_eq!(
        open(rec, &opener, &mut plain).map(|r| r.kind),
        Ok(RecordKind::Pad)
    );
    let n = encode_segment_end(&mut buf[64..], (9, Some(&sealer)), 4160);
    assert_eq!(n, segment_end_bytes(true));
    let end = decode_in(&buf[64..], 9, 4160, true).expect("a valid SegmentEnd");
    assert_eq!(
        open(end, &opener, &mut plain).map(|r| r.kind),
        Ok(RecordKind::SegmentEnd)
    );
    // Its mark changed, its crc made again: the tag fails.
    buf[HEADER_BYTES] ^= 1;
    let crc = crc32c_seeded(9, &[&buf[LEN_OFFSET..64]]);
    buf[..LEN_OFFSET].copy_from_slice(&crc.to_le_bytes());
    let rec = decode_in(&buf, 9, 4096, true).expect("framing");
    assert_eq!(
        open(rec, &opener, &mut plain).map(|r| r.kind),
        Err(RecordFault::BadTag)
    );
}
