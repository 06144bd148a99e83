//! Log segment headers (`wal/segment.rs`).
//!
//! Input:
//!
//! ```text
//! offset size field
//!      0    1 flags   bit 0: seal (set the crc at 40 to match bytes 0..40); bit 1: make it
//!                     version 3 (an encrypted database's) with its crc at 60
//!      1    … bytes   the first bytes of a segment file (any length, up to a block)
//! ```
//!
//! Checks: `SegmentHeader::decode` never panics, whatever the length; a header it accepts has
//! possible sizes and encodes back to the same 44 bytes (64 for version 3, whose cipher and
//! salt it carries); any other bytes than zeros and a
//! valid header are refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tilldb::internals::crypt::Cipher;
use tilldb::internals::wal::SegmentHeader;
use tilldb::internals::wal::segment::SegmentSeal;
use tilldb_fuzz::{
    Input, SEALED_SEGMENT_HEADER_BYTES, SEGMENT_HEADER_BYTES, seal_segment_header,
    seal_segment_header_v3,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let mut bytes = input.rest().to_vec();
    if flags & 1 != 0 {
        seal_segment_header(&mut bytes);
    }
    if flags & 2 != 0 {
        seal_segment_header_v3(&mut bytes);
    }
    let path = Path::new("/wal/00000000000000000001.wal");
    let state = SegmentHeader::decode(&bytes, path);
    let zero = bytes[..bytes.len().min(SEGMENT_HEADER_BYTES)]
        .iter()
        .all(|&b| b == 0);
    match state {
        // `HeaderState` is not exported: its Debug form tells the variants apart.
        Ok(state) if zero => assert_eq!(format!("{state:?}"), "Zero"),
        Ok(state) => {
            assert!(bytes.len() >= SEGMENT_HEADER_BYTES);
            let field = |at: usize, n: usize| {
                let mut le = [0u8; 8];
                le[..n].copy_from_slice(&bytes[at..at + n]);
                u64::from_le_bytes(le)
            };
            let version = u32::try_from(field(8, 4)).expect("4 bytes");
            let header_bytes = if version == 3 {
                SEALED_SEGMENT_HEADER_BYTES
            } else {
                SEGMENT_HEADER_BYTES
            };
            assert!(bytes.len() >= header_bytes);
            let seal = (version == 3).then(|| SegmentSeal {
                cipher: Cipher::from_code(bytes[40]).expect("a known cipher"),
                salt: bytes[44..60].try_into().expect("16 bytes"),
            });
            let header = SegmentHeader {
                version,
                log_block_bytes: u32::try_from(field(12, 4)).expect("4 bytes"),
                segment_bytes: field(16, 8),
                generation: field(24, 8),
                base_lsn: field(32, 8),
                seal,
            };
            assert_eq!(format!("{state:?}"), format!("Valid({header:?})"));
            assert!(header.log_block_bytes.is_power_of_two() && header.log_block_bytes >= 512);
            assert!(header.segment_bytes >= 8 * u64::from(header.log_block_bytes));
            assert!(header.capacity() < header.segment_bytes);
            // Round trip, for blocks small enough to allocate.
            if header.log_block_bytes <= 1 << 16 {
                let block = header.encode();
                assert_eq!(&block[..header_bytes], &bytes[..header_bytes]);
                assert!(block[header_bytes..].iter().all(|&b| b == 0));
                let again = SegmentHeader::decode(&block, path).expect("an encoded header decodes");
                assert_eq!(format!("{again:?}"), format!("Valid({header:?})"));
            }
        }
        Err(e) => {
            assert!(!zero, "zeros refused: {e}");
            assert!(matches!(e, tilldb::Error::Corruption { .. }), "{e}");
        }
    }
});
