//! Progress on standard error for the commands that walk a whole database (`check`,
//! `stats`, `backup`, `compact`, `export`, `import`): a bar where the work has a count, a
//! spinner where it has none (recovery, a close).
//!
//! Drawn only when standard error is a terminal: piped, redirected or under a test, every
//! bar is hidden and the command's output is what it was. Progress never goes to standard
//! output, which carries a command's results and `export`'s rows. A bar is cleared when it
//! is finished *and* when it is dropped (an error returned with `?`), so a line printed after
//! it, or `till: <error>`, starts on a clean line; a command prints nothing while a bar is
//! drawn (one bar per step, finished before the step's lines).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a spinner turns: it has no count to move it.
const SPINNER_TICK: Duration = Duration::from_millis(120);

/// What a bar counts, as its text shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (`1.50 MiB/20.00 MiB`).
    Bytes,
    /// Pages of the data file.
    Pages,
    /// Rows (entries) of the tables.
    Rows,
}

/// A bar of `total` (0 until known) `unit`s, labelled `what` (the step: "checking trees"),
/// drawn if standard error is a terminal.
pub fn bar(what: &'static str, unit: Unit, total: u64) -> ProgressBar {
    bar_if(true, what, unit, total)
}

/// [`bar`], drawn only if also `show` (`import`: a file large enough to take a while;
/// `export`: rows that do not go to the same terminal).
pub fn bar_if(show: bool, what: &'static str, unit: Unit, total: u64) -> ProgressBar {
    let count = match unit {
        Unit::Bytes => "{bytes}/{total_bytes}",
        Unit::Pages => "{human_pos}/{human_len} pages",
        Unit::Rows => "{human_pos}/{human_len} rows",
    };
    let template = format!("{{prefix}} {{wide_bar}} {count} {{msg}} ({{eta}} left)");
    let bar = drawn_if(show, Some(total)).with_prefix(what).with_style(
        ProgressStyle::with_template(&template).expect("a valid template: its fields are fixed"),
    );
    bar.set_length(total);
    bar
}

/// A spinner labelled `what`, for a step with no count (a recovery, a close), turning on
/// its own while the step runs, drawn if standard error is a terminal.
pub fn spinner(what: &'static str) -> ProgressBar {
    let spinner = drawn_if(true, None).with_prefix(what).with_style(
        ProgressStyle::with_template("{spinner} {prefix} ({elapsed})")
            .expect("a valid template: its fields are fixed"),
    );
    if !spinner.is_hidden() {
        spinner.enable_steady_tick(SPINNER_TICK);
    }
    spinner
}

/// The callback a `tilldb` `_with_progress` call reports to: moves `bar` to each report.
pub fn follow(bar: &ProgressBar) -> impl FnMut(tilldb::Progress) + '_ {
    move |progress| {
        bar.set_length(progress.total);
        bar.set_position(progress.done);
    }
}

/// A bar drawn on standard error when `show` and it is a terminal, else hidden (it counts
/// all the same, and draws nothing).
fn drawn_if(show: bool, len: Option<u64>) -> ProgressBar {
    let target = if show && std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    ProgressBar::with_draw_target(len, target).with_finish(ProgressFinish::AndClear)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bar follows the engine's reports: its length is the total as it grows, its position
    /// what is done (hidden or drawn alike: the test's standard error may be either).
    #[test]
    fn a_bar_follows_each_report_total_and_done() {
        let bar = bar_if(false, "copying", Unit::Bytes, 0);
        assert!(bar.is_hidden(), "not shown when not asked to be");
        let mut report = follow(&bar);
        let mut saw = Vec::new();
        for (done, total) in [(0, 10), (4, 10), (4, 25), (25, 25)] {
            let mut p = tilldb::Progress::default();
            (p.done, p.total) = (done, total);
            report(p);
            saw.push((bar.position(), bar.length()));
        }
        assert_eq!(
            saw,
            vec![(0, Some(10)), (4, Some(10)), (4, Some(25)), (25, Some(25))]
        );
    }
}
