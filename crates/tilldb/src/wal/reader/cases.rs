//! The recovery scan's decision table, as data (after TigerBeetle's `recovery_cases` in
//! `vsr/journal.zig`): what the scan finds at the lsn it expects, and, when that is no valid
//! record, whether a durable mark later in the log vouches that the log was durable past it,
//! decide what the scan does. The scan (`reader.rs`) asks [`decide`]; [`CASES`] is the table
//! `reader.rs`'s module doc shows, and the test below checks that every input matches exactly
//! one row.
//!
//! A durable mark is asked for only where a row depends on it (the faults): it costs reading
//! the rest of the segment, and maybe its successors (`reader.rs`, `check_not_damaged`).

use super::super::record::{RecordFault, RecordKind};

/// What the scan found at the lsn it expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// A valid record of this kind, at this lsn, in this segment's generation.
    Record(RecordKind),
    /// No valid record: why not.
    Fault(RecordFault),
}

/// What the scan does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    /// A commit's record: keep it, continue after it.
    Keep,
    /// Padding (with a durable mark): skip it, continue after it.
    Skip,
    /// The segment is full: continue at `base + capacity`, in the next segment of the chain.
    NextSegment,
    /// The log ends here (never written, or a torn tail): report where, and why.
    End,
    /// Damaged after it was written: `Error::Corruption` naming the file and offset.
    Corrupt,
}

/// A row's pattern over what was found.
#[derive(Debug, Clone, Copy)]
enum FoundIs {
    Record(RecordKind),
    Faults(&'static [RecordFault]),
}

/// A row's pattern over whether a later durable mark vouches for the log past this point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VouchedIs {
    /// Not asked: the row holds either way.
    Any,
    Yes,
    No,
}

/// One row of the table.
#[derive(Debug)]
pub(super) struct Case {
    found: FoundIs,
    vouched: VouchedIs,
    pub(super) decision: Decision,
    /// Why, as the module doc of `reader.rs` says it; for `Corrupt`, the error's text.
    pub(super) why: &'static str,
}

const ALL_FAULTS: &[RecordFault] = &[
    RecordFault::Zero,
    RecordFault::Truncated,
    RecordFault::BadLen,
    RecordFault::BadCrc,
    RecordFault::WrongLsn,
    RecordFault::BadHeader,
];

/// The table.
pub(super) const CASES: &[Case] = &[
    Case {
        found: FoundIs::Record(RecordKind::Data),
        vouched: VouchedIs::Any,
        decision: Decision::Keep,
        why: "a valid Data record",
    },
    Case {
        found: FoundIs::Record(RecordKind::Pad),
        vouched: VouchedIs::Any,
        decision: Decision::Skip,
        why: "a valid Pad record",
    },
    Case {
        found: FoundIs::Record(RecordKind::SegmentEnd),
        vouched: VouchedIs::Any,
        decision: Decision::NextSegment,
        why: "a valid SegmentEnd",
    },
    Case {
        found: FoundIs::Faults(&[RecordFault::Zero]),
        vouched: VouchedIs::No,
        decision: Decision::End,
        why: "zeros: never written",
    },
    Case {
        found: FoundIs::Faults(&[
            RecordFault::Truncated,
            RecordFault::BadLen,
            RecordFault::BadCrc,
        ]),
        vouched: VouchedIs::No,
        decision: Decision::End,
        why: "bad length, bad crc, truncated header: a torn tail",
    },
    Case {
        found: FoundIs::Faults(&[RecordFault::WrongLsn]),
        vouched: VouchedIs::No,
        decision: Decision::End,
        why: "valid crc but another lsn: stale or misplaced",
    },
    Case {
        found: FoundIs::Faults(&[RecordFault::BadHeader]),
        vouched: VouchedIs::No,
        decision: Decision::End,
        why: "valid crc but unknown kind or reserved bits",
    },
    Case {
        found: FoundIs::Faults(&[RecordFault::BadTag]),
        vouched: VouchedIs::Any,
        decision: Decision::Corrupt,
        // The error's text (`Error::Corruption`): no crash makes a record whose crc matches
        // and whose tag does not (a stale record of a recycled segment fails its crc).
        why: super::record::TAG_FAILED,
    },
    Case {
        found: FoundIs::Faults(ALL_FAULTS),
        vouched: VouchedIs::Yes,
        decision: Decision::Corrupt,
        // The error's text (`Error::Corruption`).
        why: "a log record is damaged, yet a later group says the log was durable past it: \
              the log was damaged after it was written, not torn by a crash",
    },
];

impl FoundIs {
    fn matches(self, found: Found) -> bool {
        match (self, found) {
            (FoundIs::Record(want), Found::Record(kind)) => want == kind,
            (FoundIs::Faults(faults), Found::Fault(fault)) => faults.contains(&fault),
            _ => false,
        }
    }
}

impl VouchedIs {
    fn matches(self, vouched: Option<bool>) -> bool {
        match self {
            VouchedIs::Any => true,
            VouchedIs::Yes => vouched == Some(true),
            VouchedIs::No => vouched == Some(false),
        }
    }
}

/// The row of [`CASES`] for `found`, asking `vouched` (whether a later durable mark vouches
/// for the log past this point) only when the rows for `found` depend on it.
pub(super) fn decide<E>(
    found: Found,
    vouched: impl FnOnce() -> Result<bool, E>,
) -> Result<&'static Case, E> {
    let rows = || CASES.iter().filter(move |c| c.found.matches(found));
    let asked = if rows().any(|c| c.vouched != VouchedIs::Any) {
        Some(vouched()?)
    } else {
        None
    };
    let mut matching = rows().filter(|c| c.vouched.matches(asked));
    let case = matching
        .next()
        .unwrap_or_else(|| panic!("no row of the scan's table for {found:?}, {asked:?}"));
    assert!(
        matching.next().is_none(),
        "two rows of the scan's table for {found:?}, {asked:?}"
    );
    Ok(case)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_found() -> Vec<Found> {
        let mut all: Vec<Found> = [RecordKind::Data, RecordKind::Pad, RecordKind::SegmentEnd]
            .into_iter()
            .map(Found::Record)
            .collect();
        all.extend(ALL_FAULTS.iter().copied().map(Found::Fault));
        all.push(Found::Fault(RecordFault::BadTag));
        all
    }

    #[test]
    fn every_input_matches_exactly_one_row() {
        // Every record kind and every fault is listed (a new variant fails to compile here).
        for found in every_found() {
            match found {
                Found::Record(RecordKind::Data | RecordKind::Pad | RecordKind::SegmentEnd)
                | Found::Fault(
                    RecordFault::Zero
                    | RecordFault::Truncated
                    | RecordFault::BadLen
                    | RecordFault::BadCrc
                    | RecordFault::WrongLsn
                    | RecordFault::BadHeader
                    | RecordFault::BadTag,
                ) => {}
            }
            for vouched in [Some(true), Some(false), None] {
                let rows: Vec<&Case> = CASES
                    .iter()
                    .filter(|c| c.found.matches(found) && c.vouched.matches(vouched))
                    .collect();
                let depends = CASES
                    .iter()
                    .any(|c| c.found.matches(found) && c.vouched != VouchedIs::Any);
                // Where no row depends on the mark, whatever it would say matches one row;
                // where one does, only a known answer matches (and exactly one row).
                let expected = if depends {
                    usize::from(vouched.is_some())
                } else {
                    1
                };
                assert_eq!(
                    rows.len(),
                    expected,
                    "{found:?} vouched {vouched:?}: {rows:?}"
                );
            }
        }
        // Every row is reachable.
        for (i, case) in CASES.iter().enumerate() {
            let hit = every_found().into_iter().any(|found| {
                [Some(true), Some(false), None]
                    .into_iter()
                    .any(|v| case.found.matches(found) && case.vouched.matches(v))
            });
            assert!(hit, "row {i} ({}) matches no input", case.why);
        }
    }

    #[test]
    fn decide_asks_for_a_durable_mark_only_where_a_row_depends_on_it() {
        for found in every_found() {
            let mut asked = false;
            let case = decide::<()>(found, || {
                asked = true;
                Ok(true)
            })
            .expect("no error");
            match found {
                Found::Record(RecordKind::Data) => assert_eq!(case.decision, Decision::Keep),
                Found::Record(RecordKind::Pad) => assert_eq!(case.decision, Decision::Skip),
                Found::Record(RecordKind::SegmentEnd) => {
                    assert_eq!(case.decision, Decision::NextSegment);
                }
                Found::Fault(_) => assert_eq!(case.decision, Decision::Corrupt),
            }
            // A tag that fails is corruption whatever a later mark says.
            let depends = matches!(found, Found::Fault(f) if f != RecordFault::BadTag);
            assert_eq!(asked, depends, "{found:?}");
            if depends {
                let end = decide::<()>(found, || Ok(false)).expect("no error");
                assert_eq!(end.decision, Decision::End, "{found:?}");
            }
        }
        let failed = decide(Found::Fault(RecordFault::BadCrc), || Err("read failed"));
        assert_eq!(failed.map(|c| c.decision), Err("read failed"));
    }
}
