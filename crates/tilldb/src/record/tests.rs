//! The commit record's encoding, decoding and the rules of parts and roles.

use super::*;
use crate::page::PageKind;

#[test]
fn round_trip_and_every_truncation_is_an_error() {
    let alloc = Alloc {
        page_count: 9,
        free_head: PageId(4),
    };
    let ops = vec![
        PageOp::Format {
            page: PageId(3),
            kind: PageKind::Leaf,
        },
        PageOp::LeafDelete {
            page: PageId(3),
            key: b"k".to_vec(),
        },
    ];
    let bytes = encode::<[Write<'_>; 0]>(Part::WHOLE, alloc, &ops, None);
    assert_eq!(
        decode(&bytes),
        Ok(Commit {
            part: Part::WHOLE,
            alloc,
            ops: ops.clone(),
            changes: None,
            role: Role::Tree,
            chunk: None,
            counts: None,
        })
    );
    for cut in 0..bytes.len() {
        assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut bad = bytes.clone();
    bad[3] = 1;
    assert!(decode(&bad).is_err());
}

fn part(index: u32, last: bool) -> Part {
    Part { index, last }
}

/// Every (open run, record) pair the log can show, and what `Runs::step` makes of it:
/// the rules at the top of the file as data, each input matching exactly one row.
#[test]
fn runs_step_table() {
    type Row = (Option<u32>, Part, Result<(Step, bool, Option<u32>), ()>);
    let table: [Row; 10] = [
        (None, part(0, true), Ok((Step::Whole, false, None))),
        (Some(3), part(0, true), Ok((Step::Whole, true, None))),
        (None, part(0, false), Ok((Step::Begins, false, Some(0)))),
        (Some(3), part(0, false), Ok((Step::Begins, true, Some(0)))),
        (
            Some(3),
            part(4, false),
            Ok((Step::Continues, false, Some(4))),
        ),
        (Some(3), part(4, true), Ok((Step::Ends, false, None))),
        (None, part(4, false), Err(())),
        (None, part(4, true), Err(())),
        (Some(3), part(5, true), Err(())),
        (Some(3), part(3, false), Err(())),
    ];
    for (open, p, expect) in table {
        let mut runs = Runs { open };
        let got = runs
            .step(p)
            .map(|(step, abandoned)| (step, abandoned, runs.open));
        assert_eq!(got.map_err(|_| ()), expect, "open {open:?}, {p:?}");
    }
    // Exhaustive over small inputs: an `Ok` leaves a state the next record can follow.
    for open in [None, Some(0), Some(1), Some(u32::MAX)] {
        for index in [0, 1, 2, u32::MAX] {
            for last in [false, true] {
                let mut runs = Runs { open };
                if let Ok((step, _)) = runs.step(part(index, last)) {
                    assert_eq!(
                        runs.is_open(),
                        matches!(step, Step::Begins | Step::Continues)
                    );
                }
            }
        }
    }
}

#[test]
fn only_finished_commits_are_committed() {
    let log = [
        part(0, true),
        part(0, false),
        part(1, false),
        part(2, true),
        part(0, false),
        part(1, false),
        part(0, true),
        part(0, false),
    ];
    assert_eq!(
        committed(&log),
        Ok(vec![true, true, true, true, false, false, true, false])
    );
    assert_eq!(committed(&[part(1, true)]).map_err(|e| e.0), Err(0));
}

#[test]
fn changes_round_trip_and_every_truncation_is_an_error() {
    let alloc = Alloc {
        page_count: 2,
        free_head: PageId(0),
    };
    let seven = [7; 300];
    let write = |table, key, value| Write { table, key, value };
    let writes = [
        write("", &b"a"[..], Some(&b"1"[..])),
        write("", b"b", None),
        write("orders", b"o-1", Some(&seven[..])),
    ];
    let bytes = encode(Part::WHOLE, alloc, &[], Some(writes.iter().copied()));
    let commit = decode(&bytes).expect("decodes");
    let changes = commit.changes.expect("carried");
    assert_eq!(changes.len(), 3);
    assert_eq!(
        changes[1],
        Change {
            table: String::new(),
            key: b"b".to_vec(),
            value: None
        }
    );
    assert_eq!(changes[2].table, "orders");
    assert_eq!(changes[2].value.as_deref(), Some(&[7; 300][..]));
    for cut in 0..bytes.len() {
        assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut bad = bytes.clone();
    bad[1] = 32;
    assert!(decode(&bad).is_err(), "an unknown flag");
}

#[test]
fn buffered_and_drain_records_round_trip() {
    let alloc = Alloc {
        page_count: 5,
        free_head: PageId(3),
    };
    let writes = [Write {
        table: "t",
        key: b"k",
        value: Some(b"v"),
    }];
    let bytes = encode_buffered(alloc, writes.iter().copied(), &[("t", -3), ("", 1)]);
    let commit = decode(&bytes).expect("decodes");
    assert_eq!(commit.role, Role::Buffered);
    assert_eq!(commit.alloc, alloc);
    assert!(commit.ops.is_empty());
    assert_eq!(commit.changes.expect("its writes").len(), 1);
    assert_eq!(
        commit.counts,
        Some(vec![("t".to_owned(), -3), (String::new(), 1)])
    );
    assert_eq!(commit.chunk, None);
    for cut in 0..bytes.len() {
        assert!(decode(&bytes[..cut]).is_err(), "buffered, cut at {cut}");
    }

    let op = PageOp::LeafDelete {
        page: PageId(4),
        key: b"k".to_vec(),
    };
    let none = None::<[Write<'_>; 0]>;
    let drain = encode_as(
        Role::Drain,
        part(2, true),
        alloc,
        std::slice::from_ref(&op),
        none,
        NO_TAIL,
    );
    let commit = decode(&drain).expect("decodes");
    assert_eq!(commit.role, Role::Drain);
    assert_eq!(commit.ops, vec![op.clone()]);
    assert_eq!(commit.part, part(2, true));
    assert_eq!((commit.chunk, commit.counts), (None, None));

    for last in [false, true] {
        let mark = ChunkMark {
            through: 0x0102_0304_0506_0708,
            last,
        };
        let chunk = encode_as(
            Role::Chunk,
            part(1, true),
            alloc,
            std::slice::from_ref(&op),
            none,
            Tail {
                chunk: Some(mark),
                counts: Some(&[("t", 7)]),
            },
        );
        let commit = decode(&chunk).expect("decodes");
        assert_eq!(commit.role, Role::Chunk);
        assert_eq!(commit.ops, vec![op.clone()]);
        assert_eq!(commit.chunk, Some(mark));
        assert_eq!(commit.counts, Some(vec![("t".to_owned(), 7)]));
        for cut in 0..chunk.len() {
            assert!(decode(&chunk[..cut]).is_err(), "chunk, cut at {cut}");
        }
        let mut bad = chunk.clone();
        let mark_at = chunk.len() - (2 + 2 + 1 + 8) - 1;
        assert_eq!(bad[mark_at], u8::from(last), "the last mark's place");
        bad[mark_at] = 2;
        assert!(decode(&bad).is_err(), "a last mark of 2");
    }
}

/// Every combination of the role flags, the changes flag, a part and ops: decode accepts
/// exactly the ones the format's rules allow, and reads them as the role they say.
#[test]
fn role_rules_table() {
    let parts = [Part::WHOLE, part(0, false), part(1, true)];
    for flags in 0..32u8 {
        for p in parts {
            for op_count in [0, 1] {
                let buffered = flags & FLAG_BUFFERED != 0;
                let drain = flags & FLAG_DRAIN != 0;
                let chunk = flags & FLAG_CHUNK != 0;
                let counts = flags & FLAG_COUNTS != 0;
                let changes = flags & FLAG_CHANGES != 0;
                let want = match (buffered, drain, chunk) {
                    _ if counts && !buffered => None,
                    (false, false, false) => Some(Role::Tree),
                    (true, false, false) if p == Part::WHOLE && op_count == 0 && changes => {
                        Some(Role::Buffered)
                    }
                    (false, true, false) if !changes => Some(Role::Drain),
                    (false, false, true) if !changes => Some(Role::Chunk),
                    _ => None,
                };
                assert_eq!(
                    check_role(flags, p, op_count).ok(),
                    want,
                    "flags {flags:#b}, {p:?}, {op_count} ops"
                );
            }
        }
    }
}
