//! Commit records (`record.rs`, through `Db::decode_commit_record`) and the page
//! operations inside them (`btree/redo.rs`).
//!
//! Input: the payload of one `Data` log record, as `till dump-log` and recovery decode it.
//!
//! Checks: neither decoder panics or allocates more than the input holds; a commit record
//! that decodes encodes back to the same bytes when its ops do (an `Image` op may encode its
//! zero run differently, so for those only decode(encode(decode(x))) == decode(x)); every op
//! alone round-trips the same way and reports its encoded length. A record with the changes
//! section (flag bit 0, `Options::change_feed`) is re-encoded with that section copied after
//! the re-encoded ops, and its changes must decode the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tilldb::Db;
use tilldb::internals::btree::{PageOp, redo};

const COMMIT_HEADER_BYTES: usize = 32;

fuzz_target!(|data: &[u8]| {
    check_op(data);
    if let Some(ops) = data.get(COMMIT_HEADER_BYTES..) {
        check_op(ops);
    }
    let Ok(commit) = Db::decode_commit_record(data) else {
        return;
    };
    let count = u32::from_le_bytes(data[24..28].try_into().expect("4 bytes")) as usize;
    assert_eq!(commit.ops.len(), count);
    let mut again = data[..COMMIT_HEADER_BYTES].to_vec();
    let mut ops_end = COMMIT_HEADER_BYTES;
    for op in &commit.ops {
        assert_ne!(op.page().0, 0, "an op of page 0 decoded");
        op.encode(&mut again);
        let (_, used) = redo::decode(&data[ops_end..]).expect("an op the record decoded");
        ops_end += used;
    }
    // The changes section (present with flag bit 0) is not the page ops' to encode: the
    // record carries it after them, unchanged.
    assert_eq!(commit.changes.is_some(), data[1] & 1 == 1);
    again.extend_from_slice(&data[ops_end..]);
    let back = Db::decode_commit_record(&again).expect("a re-encoded commit record decodes");
    assert_eq!(
        back.ops, commit.ops,
        "decode(encode(decode(x))) differs from decode(x)"
    );
    assert_eq!(back.alloc, commit.alloc);
    assert_eq!(back.changes, commit.changes);
    if !commit
        .ops
        .iter()
        .any(|op| matches!(op, PageOp::Image { .. }))
    {
        assert_eq!(again, data, "encode(decode(x)) differs from x");
    }
});

/// One op from the front of `bytes`.
fn check_op(bytes: &[u8]) {
    let Ok((op, used)) = redo::decode(bytes) else {
        return;
    };
    assert!(used <= bytes.len());
    let mut again = Vec::new();
    op.encode(&mut again);
    assert_eq!(again.len(), op.encoded_len());
    let (back, back_used) = redo::decode(&again).expect("an encoded op decodes");
    assert_eq!(back, op);
    assert_eq!(back_used, again.len());
    if !matches!(op, PageOp::Image { .. }) {
        assert_eq!(
            &again[..],
            &bytes[..used],
            "encode(decode(x)) differs from x"
        );
    }
}
