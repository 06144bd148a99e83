//! Progress of the operations that walk a whole database, for a tool to draw a bar:
//! [`Db::check_tables_with_progress`](crate::Db::check_tables_with_progress) and
//! [`Db::check_space_with_progress`](crate::Db::check_space_with_progress) (pages read),
//! [`Db::backup_to_with_progress`](crate::Db::backup_to_with_progress) (bytes copied),
//! [`Db::compact_to_with_progress`](crate::Db::compact_to_with_progress) (entries copied).
//!
//! Each takes a `&mut dyn FnMut(Progress)` and calls it from the calling thread, now and
//! then as the work goes on. Reporting changes nothing the operation does; the variants
//! without `_with_progress` pass a callback that ignores every report.
//!
//! The reports of one call keep three rules, asserted in [`Meter`]:
//!
//! ```text
//!  done  never decreases            the first report is (0, total as known then)
//!  total never decreases            an operation that learns of more work raises it
//!  done <= total, always            a count past the estimate raises total with it
//! ```
//!
//! and when the operation succeeds its last report has `done == total`. An operation that
//! fails stops reporting where it failed.

/// How far an operation has got: `done` of `total` units, in the unit the operation names
/// (pages read, bytes copied, entries copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Progress {
    /// Units done so far: never decreases, never exceeds `total`.
    pub done: u64,
    /// Units to do in all, as far as known at this report: never decreases.
    pub total: u64,
}

/// Counts an operation's progress and reports it to the caller's callback, keeping the rules
/// of the module doc: at most one report per `step` units done, besides the first, each
/// raise of the total and the last.
pub(crate) struct Meter<'a> {
    report: &'a mut dyn FnMut(Progress),
    done: u64,
    total: u64,
    /// `done` at the last report.
    reported: u64,
    /// Units done between two reports, at least (0: a report for every advance).
    step: u64,
}

impl<'a> Meter<'a> {
    /// A meter of `total` units as known now; reports `(0, total)` right away, so a bar
    /// shows before the first unit is done.
    pub(crate) fn new(report: &'a mut dyn FnMut(Progress), total: u64, step: u64) -> Self {
        let mut meter = Meter {
            report,
            done: 0,
            total,
            reported: 0,
            step,
        };
        meter.send();
        meter
    }

    /// More work found: `units` more to do in all.
    pub(crate) fn add_total(&mut self, units: u64) {
        self.total = self.total.saturating_add(units);
        self.send();
    }

    /// `units` more done. A count past the total (an estimate that fell short) raises the
    /// total with it, so a report never says more than all is done.
    pub(crate) fn advance(&mut self, units: u64) {
        self.done = self.done.saturating_add(units);
        self.total = self.total.max(self.done);
        if self.done - self.reported >= self.step {
            self.send();
        }
    }

    /// The operation succeeded: all is done, whatever the estimate was.
    pub(crate) fn finish(&mut self) {
        self.done = self.total;
        self.send();
    }

    fn send(&mut self) {
        assert!(
            self.done <= self.total,
            "{} done of {}",
            self.done,
            self.total
        );
        assert!(self.reported <= self.done, "progress went back");
        self.reported = self.done;
        (self.report)(Progress {
            done: self.done,
            total: self.total,
        });
    }
}

/// Asserts that `reports`, every report of one successful call in order, keep the rules of
/// the module doc; for the tests of each operation that reports.
#[cfg(test)]
pub(crate) fn assert_rules(reports: &[Progress]) {
    let (first, last) = (reports.first(), reports.last());
    assert_eq!(
        first.map(|p| p.done),
        Some(0),
        "the first report: {reports:?}"
    );
    assert!(
        last.is_some_and(|p| p.done == p.total),
        "the last report: {reports:?}"
    );
    for p in reports {
        assert!(p.done <= p.total, "{p:?} in {reports:?}");
    }
    for pair in reports.windows(2) {
        assert!(pair[0].done <= pair[1].done, "done went back: {pair:?}");
        assert!(pair[0].total <= pair[1].total, "total went back: {pair:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_refuse_reports_that_break_them() {
        let p = |done, total| Progress { done, total };
        assert_rules(&[p(0, 4), p(2, 4), p(4, 4)]);
        for bad in [
            vec![p(1, 4), p(4, 4)],
            vec![p(0, 4), p(2, 4)],
            vec![p(0, 4), p(3, 4), p(2, 4), p(4, 4)],
            vec![p(0, 6), p(4, 4)],
            vec![p(0, 2), p(3, 2), p(3, 3)],
        ] {
            let caught = std::panic::catch_unwind(|| assert_rules(&bad));
            assert!(caught.is_err(), "{bad:?} passed");
        }
    }

    /// Every report a meter sends, in order.
    fn collect(run: impl FnOnce(&mut Meter<'_>), total: u64, step: u64) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        {
            let mut report = |p: Progress| seen.push((p.done, p.total));
            run(&mut Meter::new(&mut report, total, step));
        }
        seen
    }

    #[test]
    fn reports_start_at_zero_come_once_a_step_and_end_at_the_total() {
        let seen = collect(
            |m| {
                for _ in 0..10 {
                    m.advance(1);
                }
                m.finish();
            },
            10,
            4,
        );
        assert_eq!(seen, vec![(0, 10), (4, 10), (8, 10), (10, 10)]);
    }

    #[test]
    fn a_count_past_the_estimate_raises_the_total_and_a_raise_is_reported() {
        let seen = collect(
            |m| {
                m.advance(3);
                m.add_total(2);
                m.advance(4);
                m.finish();
            },
            2,
            0,
        );
        assert_eq!(seen, vec![(0, 2), (3, 3), (3, 5), (7, 7), (7, 7)]);
    }

    #[test]
    fn finish_short_of_the_estimate_reports_all_done() {
        let seen = collect(
            |m| {
                m.advance(5);
                m.finish();
            },
            100,
            50,
        );
        assert_eq!(seen, vec![(0, 100), (100, 100)]);
    }
}
