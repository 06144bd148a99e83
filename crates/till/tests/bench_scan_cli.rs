//! `till bench scan`: both scans read every entry, and the lazy scan's peak resident memory
//! stays below the `Vec` scan's, which holds the whole table (issue 20, item 1).

mod common;

use common::till;

#[test]
fn the_lazy_scan_reads_everything_and_holds_less_than_the_vec_scan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = till(&[
        "bench",
        "scan",
        "--table-mib",
        "48",
        "--vec",
        "--json",
        "--dir",
        tmp.path().to_str().expect("utf-8"),
    ]);
    assert!(run.ok, "{}", run.text());
    let json = run.json();
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["entries"], json["entries"], "{r:#}");
    }
    if cfg!(target_os = "linux") {
        let lazy = rows[0]["peak_resident_bytes"]
            .as_u64()
            .expect("peak on Linux");
        let vec = rows[1]["peak_resident_bytes"]
            .as_u64()
            .expect("peak on Linux");
        // The Vec scan holds 48 MiB of values on top of what the lazy scan needs.
        assert!(lazy + (32 << 20) < vec, "lazy {lazy} B, vec {vec} B");
    }
}
