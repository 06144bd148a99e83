//! The header's encoding, decoding and slot choice.

use super::*;

fn header(generation: u64) -> Header {
    Header {
        page_bytes: 16384,
        flush_method: FlushMethod::Fdatasync,
        torn_page_guard: TornPageGuard::Doublewrite,
        generation,
        checkpoint_lsn: Lsn(4096),
        catalog_root: PageId(1),
        free_head: PageId(0),
        page_count: 9,
        encryption: None,
        write_buffer: false,
        drain_chunks: false,
    }
}

#[test]
fn golden_slot() {
    let slot = header(4).encode(1);
    let hex: Vec<String> = slot[..TAIL_OFFSET]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let hex = hex.concat();
    assert_eq!(
        hex,
        "54494c4c44423031020000000040000002020000000000000400000000000000\
         0010000000000000010000000000000000000000000000000900000000000000\
         0000000000000000000000000000000000000000000000000000000000000000\
         0000000000000000000000000000000000000000000000000000000000000000"
    );
    assert!(slot[TAIL_OFFSET..CRC_OFFSET].iter().all(|&b| b == 0));
    let crc = u32::from_le_bytes(slot[CRC_OFFSET..].try_into().expect("4 bytes"));
    assert_eq!(crc, crc32c_seeded(1, &[&slot[..CRC_OFFSET]]));
}

#[test]
fn round_trip_in_each_slot_and_the_slot_seed_catches_a_swap() {
    for slot in 0..SLOT_COUNT {
        let generation = 5 + slot as u64;
        let bytes = header(generation).encode(slot);
        assert_eq!(
            Header::decode(&bytes, slot),
            Ok(SlotState::Valid(header(generation)))
        );
        assert_eq!(Header::decode(&bytes, 1 - slot), Ok(SlotState::Torn));
    }
    assert_eq!(Header::decode(&[0; SLOT_BYTES], 0), Ok(SlotState::Zero));
}

#[test]
fn every_bit_flip_of_a_slot_is_torn() {
    for slot in 0..SLOT_COUNT {
        let good = header(1 + slot as u64).encode(slot);
        for bit in 0..SLOT_BYTES * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                Header::decode(&bad, slot),
                Ok(SlotState::Torn),
                "slot {slot} bit {bit}"
            );
        }
    }
}

/// Rewrites `bytes` with a fresh crc, so a bad field is seen past the crc check.
fn with_crc(mut bytes: AlignedBuf, slot: usize) -> AlignedBuf {
    let crc = crc32c_seeded(slot as u64, &[&bytes[..CRC_OFFSET]]);
    bytes[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// A database of the previous version opens: its header reads, and is written back as the
/// current version (at the next header write, one slot at a time).
#[test]
fn a_version_1_header_reads_and_is_written_as_version_2() {
    let mut bytes = header(3).encode(0);
    bytes[VERSION_OFFSET..PAGE_BYTES_OFFSET].copy_from_slice(&1u32.to_le_bytes());
    let bytes = with_crc(bytes, 0);
    let read = match Header::decode(&bytes, 0) {
        Ok(SlotState::Valid(h)) => h,
        other => panic!("a version 1 header: {other:?}"),
    };
    assert_eq!(read, header(3));
    let again = read.encode(0);
    assert_eq!(
        u32::from_le_bytes(
            again[VERSION_OFFSET..PAGE_BYTES_OFFSET]
                .try_into()
                .expect("4")
        ),
        2
    );
}

#[test]
fn bad_fields_under_a_good_crc_are_corruption_not_a_fallback() {
    let cases: [(usize, u8, usize); 14] = [
        (MAGIC_OFFSET, b'X', MAGIC_OFFSET),
        (VERSION_OFFSET, 6, VERSION_OFFSET),
        // Versions 4 and 5 with no feature of their own, and version 2 with a features word.
        (VERSION_OFFSET, 4, FEATURES_OFFSET),
        (VERSION_OFFSET, 5, FEATURES_OFFSET),
        (FEATURES_OFFSET, 2, FEATURES_OFFSET),
        // A feature bit this build does not know, under version 4.
        (FEATURES_OFFSET, 2 | 8, FEATURES_OFFSET),
        // Version 3 says encrypted: its key block (at 128) is all zeros here.
        (VERSION_OFFSET, 3, TAIL_OFFSET),
        (PAGE_BYTES_OFFSET + 1, 0x41, PAGE_BYTES_OFFSET),
        (FLUSH_METHOD_OFFSET, 9, FLUSH_METHOD_OFFSET),
        (GUARD_OFFSET, 0, GUARD_OFFSET),
        (ZERO_OFFSET + 3, 1, ZERO_OFFSET),
        (RESERVED_OFFSET + 52, 1, RESERVED_OFFSET),
        (CATALOG_ROOT_OFFSET, 200, CATALOG_ROOT_OFFSET),
        (GENERATION_OFFSET, 2, GENERATION_OFFSET),
    ];
    for (at, value, want) in cases {
        let mut bytes = header(3).encode(0);
        bytes[at] = value;
        if value == 2 | 8 {
            bytes[VERSION_OFFSET] = 4;
        }
        let bytes = with_crc(bytes, 0);
        match Header::decode(&bytes, 0) {
            Err((offset, _)) => assert_eq!(offset, want, "byte {at}"),
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

/// (slots, the chosen slot or the file offset of the corruption)
type Row = ([SlotState; 2], Result<Option<usize>, u64>);

#[test]
fn choose_slot_every_combination() {
    use SlotState::{Torn, Valid, Zero};
    let (h1, h2) = (header(1), header(2));
    let rows: [Row; 12] = [
        ([Zero, Zero], Ok(None)),
        ([Zero, Torn], Err(4096)),
        ([Torn, Zero], Err(0)),
        ([Torn, Torn], Err(0)),
        ([Valid(h1), Zero], Ok(Some(0))),
        ([Valid(h1), Torn], Ok(Some(0))),
        ([Zero, Valid(h2)], Ok(Some(1))),
        ([Torn, Valid(h2)], Ok(Some(1))),
        ([Valid(h1), Valid(h2)], Ok(Some(1))),
        ([Valid(h2), Valid(h1)], Ok(Some(0))),
        ([Valid(h2), Valid(h2)], Err(4096 + 24)),
        ([Valid(header(7)), Valid(header(6))], Ok(Some(0))),
    ];
    for (slots, want) in rows {
        let got = choose_slot(slots)
            .map(|c| c.map(|(slot, _)| slot))
            .map_err(|(offset, _)| offset);
        assert_eq!(got, want, "{slots:?}");
    }
}

#[test]
fn flush_method_codes_round_trip() {
    for method in FlushMethod::ALL {
        assert_eq!(
            flush_method_from_code(flush_method_code(method)),
            Some(method)
        );
    }
    assert_eq!(flush_method_from_code(0), None);
    assert_eq!(flush_method_from_code(8), None);
}

/// A database with the write buffer on has header version 4 and feature bit 1; one without
/// keeps version 2, readable by builds that know only 2 and 3.
#[test]
fn the_write_buffer_feature_is_version_4_and_round_trips() {
    let plain = header(3);
    let bytes = plain.encode(0);
    assert_eq!(bytes[VERSION_OFFSET], 2);
    assert_eq!(bytes[FEATURES_OFFSET..RESERVED_OFFSET], [0; 8]);
    let buffered = Header {
        write_buffer: true,
        ..plain
    };
    let bytes = buffered.encode(0);
    assert_eq!(bytes[VERSION_OFFSET], 4);
    assert_eq!(bytes[FEATURES_OFFSET], 2, "feature bit 1, not encrypted");
    assert_eq!(Header::decode(&bytes, 0), Ok(SlotState::Valid(buffered)));
}

/// The drain chunks' feature is version 5 with feature bits 1 and 2; a version 4 header with
/// bit 2, or a version 5 one without it, is refused by name; a build that reads up to 4
/// would refuse version 5 by its version.
#[test]
fn the_drain_chunks_feature_is_version_5_and_round_trips() {
    let chunked = Header {
        write_buffer: true,
        drain_chunks: true,
        ..header(3)
    };
    let bytes = chunked.encode(0);
    assert_eq!(bytes[VERSION_OFFSET], 5);
    assert_eq!(bytes[FEATURES_OFFSET], 2 | 4, "feature bits 1 and 2");
    assert_eq!(Header::decode(&bytes, 0), Ok(SlotState::Valid(chunked)));
    for (version, features) in [(4u32, 2u64 | 4), (5, 2), (5, 4)] {
        let mut bad = chunked.encode(0);
        bad[VERSION_OFFSET..VERSION_OFFSET + 4].copy_from_slice(&version.to_le_bytes());
        bad[FEATURES_OFFSET..FEATURES_OFFSET + 8].copy_from_slice(&features.to_le_bytes());
        let crc = crc32c_seeded(0, &[&bad[..CRC_OFFSET]]);
        bad[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        let refused = Header::decode(&bad, 0);
        assert!(
            matches!(refused, Err((FEATURES_OFFSET, _))),
            "version {version}, features {features:#b}: {refused:?}"
        );
    }
}
