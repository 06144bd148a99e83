//! Progress (issue 50, item 6): `till check`, `stats`, `backup`, `compact`, `export` and
//! `import` show progress on standard error when it is a terminal, and print nothing of it
//! when it is piped: a script reading their standard error sees exactly what it saw before.
//! A terminal is given by `script(1)` (util-linux), which runs the command on a
//! pseudo-terminal and copies what it shows to a pipe.

mod common;

use common::{options, skip_missing, till};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use tilldb::Db;

/// Steps each command labels its progress bar or spinner with (`progress.rs`).
const CHECK_STEPS: [&str; 3] = [
    "reading the log",
    "reading every page",
    "checking trees, free space",
];

/// A database of a few hundred 4 KiB pages in two tables, whose log spans segments.
fn database(tmp: &Path) -> PathBuf {
    let dir = tmp.join("db");
    let db = Db::open(&dir, options()).expect("open");
    for table in ["", "orders"] {
        for batch in 0..10u32 {
            let mut txn = db.begin().expect("begin");
            for i in 0..300u32 {
                txn.put_in(table, format!("k{batch:02}-{i:04}").as_bytes(), &[9; 300])
                    .expect("put");
            }
            txn.commit().expect("commit");
        }
    }
    db.close().expect("close");
    dir
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// A JSONL file over `import`'s 8 MiB threshold for a bar.
fn rows_file(tmp: &Path) -> PathBuf {
    let path = tmp.join("rows.jsonl");
    let value = "v".repeat(400);
    let mut text = String::new();
    for i in 0..22_000u32 {
        writeln!(
            text,
            "{{\"table\":\"t\",\"key\":\"k{i:06}\",\"value\":\"{value}\"}}"
        )
        .expect("a String takes every write");
    }
    assert!(text.len() > 8 << 20, "{} bytes", text.len());
    std::fs::write(&path, text).expect("write rows");
    path
}

/// What a progress bar or spinner would leave on standard error: a carriage return, an
/// escape sequence, the bar's and the spinner's glyphs.
fn progress_marks(text: &str) -> Vec<char> {
    const MARKS: [char; 5] = ['\r', '\x1b', '█', '░', '⠁'];
    MARKS.into_iter().filter(|m| text.contains(*m)).collect()
}

/// Each command, with its standard error piped (as every test runs it): it succeeds and
/// writes nothing there at all, progress or otherwise.
#[test]
fn piped_commands_print_no_progress() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = database(tmp.path());
    let (copy, out, rows) = (
        tmp.path().join("copy"),
        tmp.path().join("out.jsonl"),
        rows_file(tmp.path()),
    );
    let imported = tmp.path().join("imported");
    let runs: Vec<Vec<&str>> = vec![
        vec!["check", arg(&dir)],
        vec!["stats", arg(&dir)],
        vec!["stats", arg(&dir), "--json"],
        vec!["backup", arg(&dir), arg(&copy)],
        vec!["compact", arg(&dir)],
        vec!["export", arg(&dir), "--format", "jsonl"],
        vec![
            "export",
            arg(&dir),
            "--format",
            "csv",
            "--output",
            arg(&out),
        ],
        vec!["import", arg(&imported), arg(&rows), "--create"],
    ];
    for args in runs {
        let run = till(&args);
        assert!(run.ok, "till {args:?}: {}", run.text());
        assert_eq!(run.stderr, "", "till {args:?} wrote to standard error");
        assert!(
            progress_marks(&run.stdout).is_empty(),
            "till {args:?}: progress on standard output: {:?}",
            run.stdout
        );
    }
}

/// Runs `till args` on a pseudo-terminal; what the terminal showed (standard output and
/// standard error together), or `None` when `script` is missing.
fn on_terminal(test: &str, args: &[&str]) -> Option<String> {
    let command = std::iter::once(env!("CARGO_BIN_EXE_till"))
        .chain(args.iter().copied())
        .map(|word| format!("'{word}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // -q: no start and end lines; -e: the command's exit status; the typescript is not kept.
    let out = match Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip_missing(test, &format!("script (util-linux) does not run: {e}"));
            return None;
        }
    };
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "till {args:?} on a terminal: {shown}");
    Some(shown)
}

/// The same commands on a terminal draw their steps' bars (and clear them); `export`
/// draws one only when its rows go elsewhere than the terminal. Not a race with the clock:
/// indicatif draws a new bar's first updates at once (its rate limit starts with a burst),
/// however short the step.
#[test]
fn on_a_terminal_each_step_shows_its_progress() {
    let test = "on_a_terminal_each_step_shows_its_progress";
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = database(tmp.path());
    let Some(check) = on_terminal(test, &["check", arg(&dir)]) else {
        return;
    };
    assert!(check.contains("check ok"), "{check}");
    for step in CHECK_STEPS {
        assert!(check.contains(step), "no {step:?} on the terminal: {check}");
    }
    assert!(!progress_marks(&check).is_empty(), "{check}");
    let copy = tmp.path().join("copy");
    let expected: [(Vec<&str>, &[&str]); 3] = [
        (vec!["stats", arg(&dir)], &["reading the trees"]),
        (
            vec!["backup", arg(&dir), arg(&copy)],
            &["copying", "checking the copy's trees"],
        ),
        (
            vec!["compact", arg(&dir)],
            &["copying", "checking its free space"],
        ),
    ];
    for (args, steps) in expected {
        let Some(shown) = on_terminal(test, &args) else {
            return;
        };
        for step in steps {
            assert!(shown.contains(step), "till {args:?}: no {step:?}: {shown}");
        }
    }
    let out = tmp.path().join("out.jsonl");
    let to_file = on_terminal(
        test,
        &[
            "export",
            arg(&dir),
            "--format",
            "jsonl",
            "--output",
            arg(&out),
        ],
    );
    assert!(to_file.is_some_and(|shown| shown.contains("exporting")));
    let to_terminal = on_terminal(test, &["export", arg(&dir), "--format", "jsonl"]);
    assert!(
        to_terminal
            .as_deref()
            .is_some_and(|shown| { shown.contains("k09-0299") && !shown.contains("exporting") }),
        "rows on the terminal, no bar among them: {to_terminal:?}"
    );
}
