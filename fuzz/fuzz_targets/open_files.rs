//! Opening a damaged database: a small real database's files (`tilldb.meta`, `data.tdb`,
//! `doublewrite.tdb`, `ledger.tdb`, the log segments; see `src/base.rs`), changed as the input
//! says, laid onto a `SimDisk`, then `Db::open_with_storage` (recovery: header slots, torn-page
//! restore, log scan and redo), `check_space`, `check_tables`, scans of every table both ways,
//! gets, one commit read back, close, and a reopen that must still hold that commit.
//!
//! Input:
//!
//! ```text
//! offset size field
//!      0    1 variant  bit 0: 0 crash (a log tail to replay) · 1 clean (closed)
//!      1    … edits    up to 16, each: op u8, file u8, operands (`base::Edit::read`); the
//!                      file index is taken modulo the number of files
//!
//!  op % 7  edit         operands
//!       0  Overwrite    offset u32, len u8, len bytes
//!       1  Xor          offset u32, mask u8
//!       2  Truncate     len u32
//!       3  ZeroSector   sector u16
//!       4  CopyBlock    block u16, source file u8, source block u16 (4 KiB blocks)
//!       5  Remove       -
//!       6  Reseal       index u16: make one checksum match again (a header slot, a page,
//!                       the doublewrite batch header, a ledger slot, a segment header)
//! ```
//!
//! Log records are never resealed: a log record with a valid checksum is trusted, and an op
//! in it that cannot apply is an internal-invariant panic by design (`btree/redo.rs`).
//!
//! Checks: every call returns `Ok` or `Err`, never panics (except known bugs, see
//! `src/guard.rs`) or hangs (libFuzzer's `-timeout`); an acknowledged commit reads back, also
//! after close and reopen.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tilldb_fuzz::Input;
use tilldb_fuzz::base::{exercise, images, lay_down, read_edits};
use tilldb_fuzz::guard;

const EDITS_MAX: usize = 16;

fuzz_target!(
    init: {
        guard::install();
        // Build the base images before the first input, outside any input's time.
        let _ = images();
    },
    |data: &[u8]| {
        let mut input = Input::new(data);
        let variant = usize::from(input.u8() & 1);
        let edits = read_edits(&mut input, EDITS_MAX);
        let mut image = images()[variant].clone();
        for edit in &edits {
            edit.apply(&mut image);
        }
        let disk = lay_down(&image);
        guard::guarded(|| exercise(&disk));
    }
);
