//! `till tables | get | scan | export | import`, run as a user runs them: exact outputs on a
//! small database; export then import into a fresh database gives back every row of every
//! table, binary keys and values included, in each format and encoding; a bad line N of an
//! import names the file and line N and commits nothing (one transaction) or only the batches
//! before it (`--batch`, which the message says); a directory without a database is refused
//! and left as it was; a key over the engine's maximum is refused cleanly.

mod common;

use common::options;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tilldb::Db;

/// What a run of `till` printed, and its exit status.
#[derive(Debug)]
struct Run {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

fn till(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_till"))
        .args(args)
        .output()
        .expect("run till");
    Run {
        status: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("till prints UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("till prints UTF-8"),
    }
}

/// Runs `till` and requires it to succeed; returns its standard output.
fn till_ok(args: &[&str]) -> String {
    let run = till(args);
    assert_eq!(run.status, Some(0), "till {args:?}: {run:?}");
    run.stdout
}

/// Runs `till` and requires exit status 1; returns its standard error.
fn till_fails(args: &[&str]) -> String {
    let run = till(args);
    assert_eq!(run.status, Some(1), "till {args:?}: {run:?}");
    run.stderr
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Every row of every table: (table, key) to value.
type Contents = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn write_rows(dir: &Path, rows: &Contents) {
    let db = Db::open(dir, options()).expect("open");
    let mut txn = db.begin().expect("begin");
    for ((table, key), value) in rows {
        txn.put_in(table, key, value).expect("put");
    }
    txn.commit().expect("commit");
    db.close().expect("close");
}

fn contents(dir: &Path) -> Contents {
    // The database's own page size and guard: `till import --create` chose the defaults.
    let options = tilldb::Options {
        page_bytes: None,
        torn_page_guard: tilldb::TornPageGuard::Auto,
        ..options()
    };
    let db = Db::open(dir, options).expect("open");
    let mut rows = Contents::new();
    for (table, _) in db.table_entries().expect("tables") {
        let read = db.begin_read().expect("read");
        let range = read
            .range_in(
                &table,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                tilldb::Direction::Forward,
            )
            .expect("range");
        for row in range {
            let (key, value) = row.expect("row");
            rows.insert((table.clone(), key), value);
        }
    }
    db.close().expect("close");
    rows
}

/// The small database of the exact-output tests.
fn fruit() -> Contents {
    let rows: [(&str, &[u8], &[u8]); 7] = [
        ("", b"apple", b"red"),
        ("", b"apricot", b"orange"),
        ("", b"banana", b"yellow"),
        ("", b"cherry", b"dark\tred"),
        ("orders", b"o1", b"2 x coffee"),
        ("orders", b"o2", b"1 x tea"),
        ("orders", b"\x00\xff", b"\n\\"),
    ];
    rows.iter()
        .map(|(t, k, v)| (((*t).to_owned(), k.to_vec()), v.to_vec()))
        .collect()
}

fn fruit_db(tmp: &Path) -> std::path::PathBuf {
    let dir = tmp.join("db");
    write_rows(&dir, &fruit());
    dir
}

#[test]
fn tables_lists_every_table_with_its_rows() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    assert_eq!(
        till_ok(&["tables", arg(&dir)]),
        "table             rows\n(default)            4\norders               3\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&till_ok(&["tables", "--json", arg(&dir)])).expect("JSON");
    assert_eq!(
        json,
        serde_json::json!([{"name": "", "rows": 4}, {"name": "orders", "rows": 3}])
    );
}

#[test]
fn get_prints_the_value_and_a_missing_key_exits_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let dir = arg(&dir);
    assert_eq!(till_ok(&["get", dir, "banana"]), "yellow\n");
    assert_eq!(till_ok(&["get", dir, "cherry"]), "dark\\tred\n");
    assert_eq!(
        till_ok(&["get", dir, "o2", "--table", "orders"]),
        "1 x tea\n"
    );
    assert_eq!(
        till_ok(&["get", dir, "\\x00\\xff", "--table", "orders"]),
        "\\n\\\\\n"
    );
    assert_eq!(
        till_ok(&["get", dir, "00FF", "--table", "orders", "--hex"]),
        "0a5c\n"
    );
    assert_eq!(
        till_ok(&["get", dir, "AP8=", "--table", "orders", "--base64"]),
        "Clw=\n"
    );
    let miss = till(&["get", dir, "durian"]);
    assert_eq!(miss.status, Some(1), "{miss:?}");
    assert_eq!(miss.stdout, "");
    assert_eq!(
        miss.stderr,
        "till: key durian not found in table (default)\n"
    );
    assert_eq!(
        till_fails(&["get", dir, "banana", "--table", "orders"]),
        "till: key banana not found in table \"orders\"\n"
    );
    let no_table = till_fails(&["get", dir, "o1", "--table", "ordres"]);
    assert!(no_table.contains("has no such table"), "{no_table}");
    let bad = till_fails(&["get", dir, "C:\\path"]);
    assert!(bad.contains("KEY: bad escape"), "{bad}");
}

#[test]
fn scan_by_prefix_range_reversed_limited_and_in_hex() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let dir = arg(&dir);
    assert_eq!(
        till_ok(&["scan", dir]),
        "apple\tred\napricot\torange\nbanana\tyellow\ncherry\tdark\\tred\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--prefix", "ap"]),
        "apple\tred\napricot\torange\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--from", "apricot", "--to", "cherry"]),
        "apricot\torange\nbanana\tyellow\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--from", "b", "--reverse"]),
        "cherry\tdark\\tred\nbanana\tyellow\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--reverse", "--limit", "2"]),
        "cherry\tdark\\tred\nbanana\tyellow\n"
    );
    assert_eq!(till_ok(&["scan", dir, "--limit", "0"]), "");
    assert_eq!(
        till_ok(&["scan", dir, "--table", "orders", "--hex"]),
        "00ff\t0a5c\n6f31\t32207820636f66666565\n6f32\t31207820746561\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--table", "orders", "--prefix", "00", "--hex"]),
        "00ff\t0a5c\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--table", "orders"]),
        "\\x00\\xff\t\\n\\\\\no1\t2 x coffee\no2\t1 x tea\n"
    );
    assert_eq!(
        till_ok(&["scan", dir, "--table", "orders", "--format", "jsonl"]),
        "{\"key_hex\":\"00ff\",\"value\":\"\\n\\\\\"}\n\
         {\"key\":\"o1\",\"value\":\"2 x coffee\"}\n\
         {\"key\":\"o2\",\"value\":\"1 x tea\"}\n"
    );
    let conflict = till(&["scan", dir, "--prefix", "a", "--from", "b"]);
    assert_eq!(conflict.status, Some(2), "clap refuses: {conflict:?}");
    assert!(
        conflict.stderr.contains("cannot be used with"),
        "{conflict:?}"
    );
    let no_table = till_fails(&["scan", dir, "--table", "ordres"]);
    assert!(
        no_table.contains("has no table \"ordres\" (its named tables: \"orders\")"),
        "{no_table}"
    );
}

/// Rows no text form holds as it is: every byte value, tabs, newlines, commas, quotes,
/// backslashes, invalid UTF-8, empty keys and values, values in overflow pages; in the
/// default table, a named one and one whose name needs CSV quotes.
fn binary_rows() -> Contents {
    let tables = ["", "bin", "a \"quoted\", table"];
    let mut rows = Contents::new();
    for i in 0u8..=255 {
        let table = tables[usize::from(i) % tables.len()].to_owned();
        let key = match i % 4 {
            0 => format!("text key {i}").into_bytes(),
            1 => vec![i, 0, 0xff, b'\t', b'\n', b',', b'"', b'\\'],
            2 => vec![0, 0, 0, i],
            _ => "caf\u{e9} \u{85}".bytes().chain([i]).collect(),
        };
        let value = match i % 5 {
            0 => Vec::new(),
            1 => b"line one\nline, \"two\"\r\n\\".to_vec(),
            2 => (0..=255).collect(),
            3 => vec![i; 9000],
            _ => format!("value {i}").into_bytes(),
        };
        rows.insert((table, key), value);
    }
    rows.insert((String::new(), Vec::new()), b"the empty key".to_vec());
    rows
}

/// Export with `flags`, import the file into a fresh database, compare every row.
fn round_trip(tmp: &Path, name: &str, flags: &[&str]) {
    let source = tmp.join("source");
    if !source.exists() {
        write_rows(&source, &binary_rows());
    }
    let file = tmp.join(name);
    let mut export = vec!["export", arg(&source), "--output", arg(&file)];
    export.extend_from_slice(flags);
    let said = till_ok(&export);
    let rows = binary_rows().len();
    assert!(
        said.starts_with(&format!("exported {rows} rows of 3 table(s)")),
        "{said}"
    );
    let target = tmp.join(format!("{name}.db"));
    Db::open(&target, options())
        .expect("create")
        .close()
        .expect("close");
    let said = till_ok(&["import", arg(&target), arg(&file)]);
    assert!(
        said.starts_with(&format!(
            "imported {rows} rows into 3 table(s) from {}",
            file.display()
        )),
        "{said}"
    );
    assert!(said.contains("1 transaction(s)"), "{said}");
    assert!(
        contents(&target) == binary_rows(),
        "{name}: the import differs from what was exported"
    );
}

#[test]
fn export_then_import_gives_back_every_row_of_every_table() {
    let tmp = tempfile::tempdir().expect("tempdir");
    round_trip(tmp.path(), "plain.jsonl", &["--format", "jsonl"]);
    round_trip(tmp.path(), "hex.jsonl", &["--format", "jsonl", "--hex"]);
    round_trip(tmp.path(), "b64.jsonl", &["--format", "jsonl", "--base64"]);
    round_trip(tmp.path(), "hex.csv", &["--format", "csv", "--hex"]);
    round_trip(tmp.path(), "b64.csv", &["--format", "csv", "--base64"]);
    // Plain CSV, for text: quotes, commas, newlines and tabs in every field and table name.
    let text = tmp.path().join("text");
    let text_rows: Contents = [
        ("", "a,b", "say \"hi\""),
        ("", "two\nlines", "tab\there\r\n"),
        ("t, \"quoted\"", "", ""),
    ]
    .iter()
    .map(|(t, k, v)| {
        (
            ((*t).to_owned(), k.as_bytes().to_vec()),
            v.as_bytes().to_vec(),
        )
    })
    .collect();
    write_rows(&text, &text_rows);
    let file = tmp.path().join("text.csv");
    till_ok(&[
        "export",
        arg(&text),
        "--format",
        "csv",
        "--output",
        arg(&file),
    ]);
    let copy = tmp.path().join("text-copy");
    till_ok(&["import", arg(&copy), arg(&file), "--create"]);
    assert!(contents(&copy) == text_rows, "plain CSV round trip");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "table,key,value\n,\"a,b\",\"say \"\"hi\"\"\"\n,\"two\nlines\",\"tab\there\r\n\"\n\
         \"t, \"\"quoted\"\"\",,\n"
    );

    let csv = std::fs::read_to_string(tmp.path().join("hex.csv")).expect("read");
    assert!(csv.starts_with("table,key_hex,value_hex\n,,"), "{csv:.80}");
    let jsonl = std::fs::read_to_string(tmp.path().join("b64.jsonl")).expect("read");
    assert!(jsonl.contains("\"key_base64\":"), "{jsonl:.300}");
    assert!(jsonl.contains("\"key\":\"text key 0\""), "{jsonl:.300}");
}

/// Plain CSV holds text only: the first key or value that is not UTF-8 is named (table and
/// key in hex), and the user told to pass --hex or --base64.
#[test]
fn plain_csv_refuses_bytes_that_are_not_text() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let file = tmp.path().join("orders.csv");
    let args = [
        "export",
        arg(&dir),
        "--table",
        "orders",
        "--format",
        "csv",
        "--output",
        arg(&file),
    ];
    assert_eq!(
        till_fails(&args),
        format!(
            "till: table \"orders\", key 00ff (hex): the key is not UTF-8, and CSV without \
             --hex or --base64 holds text only; pass --hex or --base64; {} holds only the rows \
             before it\n",
            file.display()
        )
    );
    // The default table is text: a table of one table, with CSV quoting where needed.
    assert_eq!(
        till_ok(&["export", arg(&dir), "--table", "", "--format", "csv"]),
        "key,value\napple,red\napricot,orange\nbanana,yellow\ncherry,dark\tred\n"
    );
}

/// With the fruit database, imports `text` (as a file named `name`) with `flags`; returns
/// the file's path and standard error of the failed run.
fn import_fails(tmp: &Path, dir: &Path, name: &str, text: &str, flags: &[&str]) -> String {
    let file = tmp.join(name);
    std::fs::write(&file, text).expect("write");
    let mut args = vec!["import", arg(dir), arg(&file)];
    args.extend_from_slice(flags);
    till_fails(&args)
}

fn jsonl_row(table: &str, key: &str, value: &str) -> String {
    format!("{{\"table\":\"{table}\",\"key\":\"{key}\",\"value\":\"{value}\"}}\n")
}

#[test]
fn a_bad_line_in_one_transaction_names_the_line_and_imports_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let mut text: String = (1..=5)
        .map(|i| jsonl_row("t", &format!("k{i}"), "v"))
        .collect();
    text.push_str("{\"key\":\"x\",\"value_hex\":\"zz\"}\n");
    text.push_str(&jsonl_row("t", "k7", "v"));
    let stderr = import_fails(tmp.path(), &dir, "rows.jsonl", &text, &[]);
    let file = tmp.path().join("rows.jsonl");
    assert_eq!(
        stderr,
        format!(
            "till: {}: line 6: field \"value_hex\": bad hex \"zz\": not a hex digit at byte 0; \
             nothing was imported (the file is one transaction): the database is unchanged\n",
            file.display()
        )
    );
    assert!(contents(&dir) == fruit(), "the database changed");

    let csv = "table,key,value\nt,a,1\nt,b,2\n\"t\",\"c\",\"3\"\nt,d\nt,e,5\n";
    let stderr = import_fails(tmp.path(), &dir, "rows.csv", csv, &[]);
    assert!(
        stderr.starts_with(&format!(
            "till: {}: line 5: 2 fields, and the header has 3; nothing was imported",
            tmp.path().join("rows.csv").display()
        )),
        "{stderr}"
    );
    assert!(contents(&dir) == fruit(), "the database changed");
}

#[test]
fn a_bad_line_with_batches_keeps_the_batches_before_it_and_says_where_to_resume() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let mut text: String = (1..=7)
        .map(|i| jsonl_row("t", &format!("k{i}"), "v"))
        .collect();
    text.push_str("{\"key\":\"x\",\"value_hex\":\"zz\"}\n");
    text.push_str(&jsonl_row("t", "k9", "v"));
    let stderr = import_fails(tmp.path(), &dir, "rows.jsonl", &text, &["--batch", "3"]);
    assert_eq!(
        stderr,
        format!(
            "till: {}: line 8: field \"value_hex\": bad hex \"zz\": not a hex digit at byte 0; \
             6 rows were committed before it, in 2 transaction(s) of 3 rows; the rows from \
             line 7 on were not: import the file again from line 7\n",
            tmp.path().join("rows.jsonl").display()
        )
    );
    let mut expected = fruit();
    for i in 1..=6 {
        expected.insert(
            ("t".to_owned(), format!("k{i}").into_bytes()),
            b"v".to_vec(),
        );
    }
    assert!(
        contents(&dir) == expected,
        "not exactly lines 1-6 committed"
    );

    // A bad first line: no batch committed, nothing changed.
    let stderr = import_fails(
        tmp.path(),
        &dir,
        "first.jsonl",
        "{\"key\":\"x\"}\n",
        &["--batch", "3"],
    );
    assert!(
        stderr.ends_with(
            "line 1: no value (value, value_hex or value_base64); no batch was committed \
             before it: the database is unchanged\n"
        ),
        "{stderr}"
    );
    assert!(contents(&dir) == expected, "the database changed");
}

#[test]
fn a_key_over_the_maximum_is_refused_with_its_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let text = format!(
        "{}{}",
        jsonl_row("", "fine", "v"),
        jsonl_row("", &"k".repeat(5000), "v")
    );
    let stderr = import_fails(tmp.path(), &dir, "big.jsonl", &text, &[]);
    let at = format!(
        "till: {}: line 2: key of 5000 bytes is larger than the maximum of ",
        tmp.path().join("big.jsonl").display()
    );
    assert!(stderr.starts_with(&at), "{stderr}");
    assert!(stderr.ends_with("the database is unchanged\n"), "{stderr}");
    assert!(contents(&dir) == fruit(), "the database changed");
}

#[test]
fn import_puts_rows_in_the_table_given_and_reads_the_format_from_the_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let file = tmp.path().join("rows.ndjson");
    std::fs::write(
        &file,
        jsonl_row("orders", "z", "1") + &jsonl_row("", "y", "2"),
    )
    .expect("write");
    let said = till_ok(&["import", arg(&dir), arg(&file), "--table", "other"]);
    assert!(
        said.starts_with("imported 2 rows into 1 table(s)"),
        "{said}"
    );
    assert_eq!(
        till_ok(&["scan", arg(&dir), "--table", "other"]),
        "y\t2\nz\t1\n"
    );
    let text = tmp.path().join("rows.txt");
    std::fs::write(&text, "").expect("write");
    let stderr = till_fails(&["import", arg(&dir), arg(&text)]);
    assert!(
        stderr.contains("pass --format jsonl or --format csv"),
        "{stderr}"
    );
}

/// What is in a directory (names, recursively), to show a refused command changed nothing.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_directory_without_a_database_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("typo");
    let empty = tmp.path().join("empty");
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&empty).expect("mkdir");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::fs::write(foreign.join("notes.txt"), "mine").expect("write");
    let file = tmp.path().join("rows.jsonl");
    std::fs::write(&file, jsonl_row("", "k", "v")).expect("write");
    for dir in [&missing, &empty, &foreign] {
        let d = arg(dir);
        let commands: [&[&str]; 5] = [
            &["tables", d],
            &["get", d, "k"],
            &["scan", d],
            &["export", d, "--format", "jsonl"],
            &["import", d, arg(&file)],
        ];
        for args in commands {
            let stderr = till_fails(args);
            assert!(
                stderr.starts_with(&format!("till: {d} holds no tilldb database")),
                "{args:?}: {stderr}"
            );
        }
    }
    assert!(!missing.exists(), "a database was made at a mistyped path");
    assert!(listing(&empty).is_empty(), "{:?}", listing(&empty));
    assert_eq!(listing(&foreign), ["notes.txt"]);

    // --create makes one where there is none, and never in another program's directory.
    let stderr = till_fails(&["import", arg(&foreign), arg(&file), "--create"]);
    assert!(stderr.contains("is not a tilldb database"), "{stderr}");
    assert_eq!(listing(&foreign), ["notes.txt"]);
    let said = till_ok(&["import", arg(&missing), arg(&file), "--create"]);
    assert!(
        said.starts_with("imported 1 rows into 1 table(s)"),
        "{said}"
    );
    assert_eq!(till_ok(&["get", arg(&missing), "k"]), "v\n");
}

#[test]
fn a_database_open_in_another_process_is_read_live_and_refused_for_import() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fruit_db(tmp.path());
    let db = Db::open(&dir, options()).expect("open");
    let mut txn = db.begin().expect("begin");
    txn.put(b"damson", b"purple").expect("put");
    txn.commit().expect("commit");
    // Read through a read-only handle: the writer's durable commits, its own included.
    assert_eq!(till_ok(&["get", arg(&dir), "damson"]), "purple\n");
    let scanned = till_ok(&["scan", arg(&dir)]);
    assert!(
        scanned.starts_with("apple\tred\n") && scanned.contains("damson"),
        "{scanned}"
    );
    let file = tmp.path().join("more.jsonl");
    std::fs::write(&file, "{\"key\":\"elder\",\"value\":\"black\"}\n").expect("write");
    let stderr = till_fails(&["import", arg(&dir), arg(&file)]);
    assert!(stderr.contains("is already open"), "{stderr}");
    assert!(stderr.contains("no other process has it open"), "{stderr}");
    db.close().expect("close");
    assert_eq!(till_ok(&["get", arg(&dir), "apple"]), "red\n");
}
