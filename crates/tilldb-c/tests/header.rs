//! `include/tilldb.h` is what cbindgen makes of `src/` (`lib.rs` and its modules) with `cbindgen.toml`: a header
//! that drifted from the ABI fails here. `TILLDB_BLESS=1 cargo test -p tilldb-c` rewrites it.

use std::path::Path;

#[test]
fn the_checked_in_header_is_what_cbindgen_makes_of_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads src/")
        .write(&mut made);
    let path = dir.join("include").join("tilldb.h");
    if std::env::var("TILLDB_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &made).expect("write the header");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == made,
        "{} is stale: run TILLDB_BLESS=1 cargo test -p tilldb-c --test header and commit it",
        path.display()
    );
}
