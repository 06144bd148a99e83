//! # Commit record format (store version 2; 4 and 5 with the write buffer; version 1 records read as whole commits)
//!
//! The payload of a log record (`wal::RecordKind::Data`) of a commit. A commit is one record,
//! or, when its page operations would not fit one (a large transaction), several *parts* in a
//! row: parts `0..n-1` of kind `Part`, then part `n` of kind `Commit`. Little-endian.
//!
//! ```text
//! offset size field
//!      0    1 kind         1 Commit (a whole commit, or the last part of one) · 2 Part (not
//!                          the last)
//!      1    1 flags        bit 0: the changes section follows the ops (`Options::change_feed`)
//!                          bit 1: a *buffered* commit: its writes go to the write buffer, not
//!                          the tree (`txn/buffer.rs`); kind Commit, part 0, no ops, bit 0 set
//!                          (the changes section is the commit), bit 2 clear
//!                          bit 2: a *drain*: a part of the commit that applied the whole
//!                          write buffer to the tree (every part of it has the bit; builds
//!                          before 2026-12-07 set it on the last part only); once its last
//!                          part is in the log, every buffered commit before its first part
//!                          is in the tree (in its ops, or in the drain chunks before it);
//!                          bit 0 clear (the feed delivered the writes from the buffered
//!                          records, and skips a drain)
//!                          bit 3: a *drain chunk* (store version 5): a part of a commit that
//!                          applied some keys of the generation being drained in chunks
//!                          (`txn/buffer.rs`, "Chunks"; every part has the bit); the buffered
//!                          commits stay; bits 0-2 clear; the chunk section follows the ops of
//!                          its last part
//!                          bit 4: with bit 1 (store version 5): the counts section follows
//!                          the changes section
//!                          the other bits must be zero; bits 1 and 2 only under a header
//!                          with the write-buffer feature (version 4 or 5, `header.rs`), bits
//!                          3 and 4 only under version 5: replay refuses them by name under
//!                          any other (`db/open/replay.rs`)
//!      2    2 zero         must be zero
//!      4    4 part         this record's place in its commit, from 0 (0 and kind Commit: a
//!                          whole commit; version 1 wrote zero here)
//!      8    8 page_count   allocator state after the record: pages handed out, page 0 included
//!     16    8 free_head    first page of the free list after the record (0: empty)
//!     24    4 op_count     page operations that follow
//!     28    4 zero         must be zero
//!     32    … ops          `op_count` page operations, each as `btree::redo` encodes it
//!      …    … changes      with flag bit 0 only: the writes whose ops this record holds, as
//!                          the application made them, for the change feed (`feed.rs`); replay
//!                          ignores them
//! ```
//!
//! The chunk section (bit 3) and the counts section (bit 4, and in the chunk section):
//!
//! ```text
//! size field
//!    8 through      chunk only: the end of the last buffered commit of the generation the
//!                   chunk drains (every chunk of one drain names the same)
//!    1 last         chunk only: 1, the drain's last chunk: every buffered commit ending at or
//!                   before `through` is in the tree (this chunk's ops and the ones before);
//!                   0, not the last
//!    2 table_count  counts section: tables whose row count the commit changed
//!  per table:
//!    2 name_len     bytes of the table name (0: the default table)
//!    … name         UTF-8
//!    8 delta        i64: rows the commit added to the table, less the rows it removed
//! ```
//!
//! A buffered commit's counts are the ones its writer found (its keys looked up in the
//! buffer, else the tree); a chunk's are the ones it applied to the catalog. Recovery and a
//! read-only handle's refresh rebuild the buffer's row counts from them alone: a buffered
//! commit adds its counts at its lsn, a chunk takes its own off at its lsn (the catalog holds
//! them from there), so the length a reader sees never counts a row twice
//! (`db/commit/buffer.rs`, `rebuild`).
//!
//! The changes section, in key order within each table, tables in name order (across the
//! parts of a commit too):
//!
//! ```text
//! size field
//!    4 change_count
//!  per change:
//!    1 kind         1 put · 2 delete
//!    2 table_len    bytes of the table name (0: the default table)
//!    … table        UTF-8
//!    4 key_len
//!    … key
//!    4 value_len    puts only
//!    … value        puts only
//! ```
//!
//! The parts of one commit are adjacent in the log: the writer lock is held from the first to
//! the last. A part `i > 0` follows part `i - 1` of the same commit; a run of parts that the
//! log ends before its `Commit` (a crash while a large transaction committed), or that a
//! record of part 0 interrupts (the log a reopen wrote after such a crash), is a commit that
//! never happened: replay applies none of it ([`Commits`]), the feed delivers none of it. A
//! part's pages are never written to the data file before its commit's last part is durable
//! (the buffer pool holds or spills them, `page/buffer_pool.rs`), so the data file never holds
//! a change replay would not make.
//!
//! Replay applies each op to its page iff the page's lsn is below the record's end lsn, then
//! sets the allocator state from the last part. Bytes that break this format are corruption of
//! a record whose checksum matched: reported with the log file and offset, never applied. A
//! build older than the changes section reads a flagged record as such corruption: a database
//! with the change feed on needs this build or a later one; the header's version says whether
//! the log may hold parts (`header.rs`).

use crate::btree::PageOp;
use crate::btree::redo;
use crate::page::PageId;

const KIND_COMMIT: u8 = 1;
const KIND_PART: u8 = 2;
const FLAG_CHANGES: u8 = 1;
const FLAG_BUFFERED: u8 = 2;
const FLAG_DRAIN: u8 = 4;
const FLAG_CHUNK: u8 = 8;
const FLAG_COUNTS: u8 = 16;
const CHANGE_PUT: u8 = 1;
const CHANGE_DELETE: u8 = 2;
/// Bytes before the ops.
pub const HEADER_BYTES: usize = 32;

/// The allocator's state: what a commit leaves behind for the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    /// Pages handed out, page 0 included.
    pub page_count: u64,
    /// The first page of the free list (0: empty).
    pub free_head: PageId,
}

/// One write of a committed transaction, as the change feed shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The table (`""`: the default table).
    pub table: String,
    /// The key written.
    pub key: Vec<u8>,
    /// The new value; `None`: the key was deleted.
    pub value: Option<Vec<u8>>,
}

/// Where a record stands in its commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// From 0.
    pub index: u32,
    /// The commit's last record (kind Commit): the commit happened once this is in the log.
    pub last: bool,
}

impl Part {
    /// A commit in one record.
    pub const WHOLE: Part = Part {
        index: 0,
        last: true,
    };
}

/// What a commit record does besides its ops (flag bits 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Its ops change the tree; nothing else (every record before header version 4).
    #[default]
    Tree,
    /// A buffered commit: its changes section goes to the write buffer; it has no ops.
    Buffered,
    /// A part of a drain: with its last part, the buffered commits before it are applied.
    Drain,
    /// A part of a drain chunk: some keys of the generation being drained applied; its last
    /// part's [`ChunkMark`] says which drain and whether it was the last chunk.
    Chunk,
}

impl Role {
    fn flag(self) -> u8 {
        match self {
            Role::Tree => 0,
            Role::Buffered => FLAG_BUFFERED,
            Role::Drain => FLAG_DRAIN,
            Role::Chunk => FLAG_CHUNK,
        }
    }
}

/// A decoded commit record: a whole commit, or one part of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Where the record stands in its commit.
    pub part: Part,
    /// The allocator state after the record.
    pub alloc: Alloc,
    /// The page operations, in the order replay applies them.
    pub ops: Vec<PageOp>,
    /// The writes, when the record carries them (`Options::change_feed`, or a buffered
    /// commit).
    pub changes: Option<Vec<Change>>,
    /// Whether it is a buffered commit, a drain or a drain chunk.
    pub role: Role,
    /// A chunk's place in its drain (role `Chunk`, last part only).
    pub chunk: Option<ChunkMark>,
    /// Per table, the rows the commit added less those it removed: a chunk's always, a
    /// buffered commit's from store version 5 (flag bit 4).
    pub counts: Option<Counts>,
}

/// Per table (by name, `""` the default table), the rows a commit added less those it
/// removed; tables whose count did not change are left out.
pub type Counts = Vec<(String, i64)>;

/// A tail that carries nothing: a tree commit's.
pub const NO_TAIL: Tail<'static> = Tail {
    chunk: None,
    counts: None,
};

/// A drain chunk's place in its drain (the chunk section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkMark {
    /// The end of the last buffered commit of the generation being drained.
    pub through: u64,
    /// The drain's last chunk: every buffered commit ending at or before `through` is in the
    /// tree once it is.
    pub last: bool,
}

/// What a record carries after its ops and changes: a chunk's section, or a buffered
/// commit's counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tail<'a> {
    /// A chunk's place (role `Chunk`).
    pub chunk: Option<ChunkMark>,
    /// The counts section (a chunk's, or a buffered commit's).
    pub counts: Option<&'a [(&'a str, i64)]>,
}

impl Tail<'_> {
    /// Bytes it takes in the record.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.chunk.map_or(0, |_| 9)
            + self.counts.map_or(0, |counts| {
                2 + counts
                    .iter()
                    .map(|(table, _)| 2 + table.len() + 8)
                    .sum::<usize>()
            })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Some(mark) = self.chunk {
            out.extend_from_slice(&mark.through.to_le_bytes());
            out.push(u8::from(mark.last));
        }
        if let Some(counts) = self.counts {
            out.extend_from_slice(
                &u16::try_from(counts.len())
                    .expect("fewer tables than a u16 counts")
                    .to_le_bytes(),
            );
            for (table, delta) in counts {
                out.extend_from_slice(
                    &u16::try_from(table.len())
                        .expect("table names are short")
                        .to_le_bytes(),
                );
                out.extend_from_slice(table.as_bytes());
                out.extend_from_slice(&delta.to_le_bytes());
            }
        }
    }
}

/// How a record stands to the records before it, as [`Runs::step`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A whole commit.
    Whole,
    /// The first part of a commit logged in parts.
    Begins,
    /// A later part, not the last.
    Continues,
    /// The last part: the commit whose parts came before is whole.
    Ends,
}

/// Follows the parts of commits along the log (the rules at the top of this file). Replay,
/// the change feed and `till dump-log` read records through one of these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runs {
    /// The index of the last part of the commit being read in parts, if one is open.
    open: Option<u32>,
}

impl Runs {
    /// The next record's place. Also returns whether a commit read in parts was left
    /// unfinished by it (the record starts a new commit: that one never happened). `Err`: the
    /// part cannot be where it is (a later part with no open commit, or out of order).
    pub fn step(&mut self, part: Part) -> Result<(Step, bool), &'static str> {
        let open = self.open;
        let (step, next) = match (open, part.index, part.last) {
            (_, 0, true) => (Step::Whole, None),
            (_, 0, false) => (Step::Begins, Some(0)),
            (Some(k), i, last) if k.checked_add(1) == Some(i) => {
                if last {
                    (Step::Ends, None)
                } else {
                    (Step::Continues, Some(i))
                }
            }
            (None, _, _) => {
                return Err("a later part of a commit whose first part is not in the log read");
            }
            (Some(_), _, _) => return Err("a part of a commit out of order"),
        };
        let abandoned = open.is_some() && part.index == 0;
        self.open = next;
        Ok((step, abandoned))
    }

    /// Whether a commit read in parts is open (its last part not read yet).
    #[must_use]
    pub fn is_open(self) -> bool {
        self.open.is_some()
    }
}

/// For each record of a stretch of log (their parts in log order), whether it belongs to a
/// commit that happened: a whole commit, or a part of one whose last part is there too.
/// `Err`: the index of a part out of place, and what is wrong.
pub fn committed(parts: &[Part]) -> Result<Vec<bool>, (usize, &'static str)> {
    let mut runs = Runs::default();
    let mut applies = vec![false; parts.len()];
    let mut begun = 0;
    for (i, &part) in parts.iter().enumerate() {
        match runs.step(part).map_err(|what| (i, what))?.0 {
            Step::Whole => applies[i] = true,
            Step::Begins => begun = i,
            Step::Continues => {}
            Step::Ends => applies[begun..=i].fill(true),
        }
    }
    if crate::mutants::active("replay-applies-unfinished-parts") {
        applies.fill(true);
    }
    Ok(applies)
}

/// The part a commit record is (its header alone, checked as [`decode`] checks it).
pub fn part_of(bytes: &[u8]) -> Result<Part, &'static str> {
    header_part(bytes)
}

/// One write of a commit: a key of a table and its new value (`None`: deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write<'a> {
    /// The table's name (`""`: the default table).
    pub table: &'a str,
    /// The key.
    pub key: &'a [u8],
    /// The new value; `None` deletes the key.
    pub value: Option<&'a [u8]>,
}

/// Bytes the changes section takes for `writes`.
pub fn changes_len<'a>(writes: impl IntoIterator<Item = Write<'a>>) -> usize {
    4 + writes
        .into_iter()
        .map(|w| 1 + 2 + w.table.len() + 4 + w.key.len() + w.value.map_or(0, |v| 4 + v.len()))
        .sum::<usize>()
}

/// Bytes reserved for a record's page operations before encoding them: a one-put commit's
/// leaf put (key, value and their headers) fits.
const OPS_BYTES_GUESS: usize = 512;

/// Encodes a commit record; with `changes`, the changes section too.
#[must_use]
pub fn encode<'a, I>(part: Part, alloc: Alloc, ops: &[PageOp], changes: Option<I>) -> Vec<u8>
where
    I: IntoIterator<Item = Write<'a>> + Clone,
{
    encode_as(Role::Tree, part, alloc, ops, changes, NO_TAIL)
}

/// Encodes a buffered commit: `writes` (at most one per key), no ops, the allocator state
/// unchanged (`alloc`, as the last record left it), and the rows it added less those it
/// removed, per table (`counts`).
#[must_use]
pub fn encode_buffered<'a, I>(alloc: Alloc, writes: I, counts: &[(&str, i64)]) -> Vec<u8>
where
    I: IntoIterator<Item = Write<'a>> + Clone,
{
    let tail = Tail {
        chunk: None,
        counts: Some(counts),
    };
    encode_as(Role::Buffered, Part::WHOLE, alloc, &[], Some(writes), tail)
}

/// Encodes a commit record of `role` (see the flags at the top of the file), with `tail`
/// after its ops and changes (a chunk's section, a buffered commit's counts).
///
/// # Panics
///
/// When the record breaks its role's rules: a buffered commit with ops, in parts or without
/// its writes; a drain that carries changes; a chunk without its section or not a last
/// part; a tail its role does not take.
#[must_use]
pub fn encode_as<'a, I>(
    role: Role,
    part: Part,
    alloc: Alloc,
    ops: &[PageOp],
    changes: Option<I>,
    tail: Tail<'_>,
) -> Vec<u8>
where
    I: IntoIterator<Item = Write<'a>> + Clone,
{
    let mut out = Vec::new();
    encode_as_into(&mut out, role, part, alloc, ops, changes, tail);
    out
}

/// [`encode_as`] into `out`, which it clears first: a committer that keeps one `out` for
/// every record encodes each into memory already faulted in (a drain's records of
/// megabytes of page images, each in a fresh vector, spent a sixth of its time having the
/// kernel zero new pages for them: docs/write-buffer.md).
///
/// # Panics
///
/// As [`encode_as`].
pub fn encode_as_into<'a, I>(
    out: &mut Vec<u8>,
    role: Role,
    part: Part,
    alloc: Alloc,
    ops: &[PageOp],
    changes: Option<I>,
    tail: Tail<'_>,
) where
    I: IntoIterator<Item = Write<'a>> + Clone,
{
    let counts_flag = if role == Role::Buffered && tail.counts.is_some() {
        FLAG_COUNTS
    } else {
        0
    };
    let flags = role.flag() | counts_flag | if changes.is_some() { FLAG_CHANGES } else { 0 };
    assert_eq!(
        check_role(flags, part, ops.len()),
        Ok(role),
        "a {role:?} record that breaks its rules"
    );
    let section = role == Role::Chunk && part.last;
    assert_eq!(
        (section, section || counts_flag != 0),
        (tail.chunk.is_some(), tail.counts.is_some()),
        "a {role:?} record with a tail it does not take"
    );
    // Sized for the changes and a small op or two; a larger record grows the vector (sizing
    // it exactly meant encoding every op twice).
    let changes_bytes = changes.clone().map_or(0, changes_len);
    out.clear();
    out.reserve(HEADER_BYTES + OPS_BYTES_GUESS + changes_bytes);
    out.push(if part.last { KIND_COMMIT } else { KIND_PART });
    out.push(flags);
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&part.index.to_le_bytes());
    out.extend_from_slice(&alloc.page_count.to_le_bytes());
    out.extend_from_slice(&alloc.free_head.0.to_le_bytes());
    out.extend_from_slice(&u32::try_from(ops.len()).expect("ops fit u32").to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    assert_eq!(out.len(), HEADER_BYTES);
    for op in ops {
        op.encode(out);
    }
    let ops_end = out.len();
    if let Some(changes) = changes {
        let count_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut count = 0u32;
        for Write { table, key, value } in changes {
            let len32 = |n: usize| u32::try_from(n).expect("under the log's record limit");
            out.push(if value.is_some() {
                CHANGE_PUT
            } else {
                CHANGE_DELETE
            });
            out.extend_from_slice(
                &u16::try_from(table.len())
                    .expect("table names are short")
                    .to_le_bytes(),
            );
            out.extend_from_slice(table.as_bytes());
            out.extend_from_slice(&len32(key.len()).to_le_bytes());
            out.extend_from_slice(key);
            if let Some(v) = value {
                out.extend_from_slice(&len32(v.len()).to_le_bytes());
                out.extend_from_slice(v);
            }
            count += 1;
        }
        out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
    }
    assert_eq!(
        out.len(),
        ops_end + changes_bytes,
        "changes_len is the section's size"
    );
    let tail_at = out.len();
    tail.encode(out);
    assert_eq!(out.len(), tail_at + tail.bytes(), "a tail's size");
}

/// Encodes a commit record without the changes section (the one a create makes).
#[must_use]
pub fn encode_plain(alloc: Alloc, ops: &[PageOp]) -> Vec<u8> {
    encode::<[Write<'_>; 0]>(Part::WHOLE, alloc, ops, None)
}

/// Decodes a commit record; `Err` names what is wrong.
pub fn decode(bytes: &[u8]) -> Result<Commit, &'static str> {
    let part = header_part(bytes)?;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    let alloc = Alloc {
        page_count: u64_at(8),
        free_head: PageId(u64_at(16)),
    };
    let count = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes")) as usize;
    let mut ops = Vec::with_capacity(count.min(bytes.len() / redo::OP_HEADER_BYTES));
    let mut at = HEADER_BYTES;
    for _ in 0..count {
        let (op, used) = redo::decode(&bytes[at..])?;
        ops.push(op);
        at += used;
    }
    let changes = if bytes[1] & FLAG_CHANGES == 0 {
        None
    } else {
        let (changes, used) = decode_changes(&bytes[at..])?;
        at += used;
        Some(changes)
    };
    let role = check_role(bytes[1], part, ops.len())?;
    let section = role == Role::Chunk && part.last;
    let chunk = if section {
        const SHORT: &str = "a drain chunk's section is cut short";
        let through = bytes.get(at..at + 8).ok_or(SHORT)?;
        let last = match bytes.get(at + 8).ok_or(SHORT)? {
            0 => false,
            1 => true,
            _ => return Err("a drain chunk's last mark is neither 0 nor 1"),
        };
        at += 9;
        Some(ChunkMark {
            through: u64::from_le_bytes(through.try_into().expect("8 bytes")),
            last,
        })
    } else {
        None
    };
    let counts = if section || bytes[1] & FLAG_COUNTS != 0 {
        let (counts, used) = decode_counts(&bytes[at..])?;
        at += used;
        Some(counts)
    } else {
        None
    };
    if at != bytes.len() {
        return Err("commit record has bytes after its last op, change or count");
    }
    Ok(Commit {
        part,
        alloc,
        ops,
        changes,
        role,
        chunk,
        counts,
    })
}

/// Decodes a counts section; returns the counts and the bytes it took.
fn decode_counts(bytes: &[u8]) -> Result<(Counts, usize), &'static str> {
    const SHORT: &str = "commit record's counts section is cut short";
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], &'static str> {
        let part = bytes.get(at..at + n).ok_or(SHORT)?;
        at += n;
        Ok(part)
    };
    let u16_of = |b: &[u8]| usize::from(u16::from_le_bytes(b.try_into().expect("2 bytes")));
    let count = u16_of(take(2)?);
    let mut counts = Vec::with_capacity(count.min(bytes.len() / 10));
    for _ in 0..count {
        let name_len = u16_of(take(2)?);
        let table = std::str::from_utf8(take(name_len)?)
            .map_err(|_| "commit record's counts name a table that is not UTF-8")?
            .to_owned();
        let delta = i64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        counts.push((table, delta));
    }
    Ok((counts, at))
}

/// The role `flags` give a record of `part` with `op_count` ops, or what breaks its rules.
fn check_role(flags: u8, part: Part, op_count: usize) -> Result<Role, &'static str> {
    let changes = flags & FLAG_CHANGES != 0;
    if flags & FLAG_COUNTS != 0 && flags & FLAG_BUFFERED == 0 {
        return Err("commit record flagged with counts but not buffered");
    }
    if flags & FLAG_CHUNK != 0 {
        return match () {
            () if flags & (FLAG_BUFFERED | FLAG_DRAIN) != 0 => {
                Err("a drain chunk record flagged buffered or a drain too")
            }
            () if changes => Err("a drain chunk record with a changes section"),
            () => Ok(Role::Chunk),
        };
    }
    match (flags & FLAG_BUFFERED != 0, flags & FLAG_DRAIN != 0) {
        (false, false) => Ok(Role::Tree),
        (true, true) => Err("commit record flagged both buffered and a drain"),
        (true, false) if part != Part::WHOLE => Err("a buffered commit record in parts"),
        (true, false) if op_count != 0 => Err("a buffered commit record with page operations"),
        (true, false) if !changes => Err("a buffered commit record without its writes"),
        (true, false) => Ok(Role::Buffered),
        (false, true) if changes => Err("a drain record with a changes section"),
        (false, true) => Ok(Role::Drain),
    }
}

/// Checks a commit record's header; returns its part.
fn header_part(bytes: &[u8]) -> Result<Part, &'static str> {
    if bytes.len() < HEADER_BYTES {
        return Err("commit record shorter than its header");
    }
    if !matches!(bytes[0], KIND_COMMIT | KIND_PART)
        || bytes[1] & !(FLAG_CHANGES | FLAG_BUFFERED | FLAG_DRAIN | FLAG_CHUNK | FLAG_COUNTS) != 0
        || bytes[2..4] != [0; 2]
        || bytes[28..32] != [0; 4]
    {
        return Err("commit record header has an unknown kind, flag or nonzero reserved bytes");
    }
    Ok(Part {
        index: u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")),
        last: bytes[0] == KIND_COMMIT,
    })
}

/// Decodes a changes section; returns the changes and the bytes it took.
fn decode_changes(bytes: &[u8]) -> Result<(Vec<Change>, usize), &'static str> {
    const SHORT: &str = "commit record's changes section is cut short";
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], &'static str> {
        let part = bytes.get(at..at + n).ok_or(SHORT)?;
        at += n;
        Ok(part)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
    let count = u32_of(take(4)?);
    let mut changes = Vec::with_capacity(count.min(bytes.len() / 11));
    for _ in 0..count {
        let kind = take(1)?[0];
        let table_len = usize::from(u16::from_le_bytes(take(2)?.try_into().expect("2 bytes")));
        let table = std::str::from_utf8(take(table_len)?)
            .map_err(|_| "commit record's changes name a table that is not UTF-8")?
            .to_owned();
        let key_len = u32_of(take(4)?);
        let key = take(key_len)?.to_vec();
        let value = match kind {
            CHANGE_PUT => {
                let value_len = u32_of(take(4)?);
                Some(take(value_len)?.to_vec())
            }
            CHANGE_DELETE => None,
            _ => return Err("commit record's changes hold an unknown kind of change"),
        };
        changes.push(Change { table, key, value });
    }
    Ok((changes, at))
}

#[cfg(test)]
mod tests;
