//! # Spilled runs (`txn-writes-<n>.tdb`): a large transaction's writes on disk
//!
//! A transaction whose write set outgrows `Options::write_set_bytes` sorts what it holds in
//! memory into one run and writes it to a file of its own, then starts again with an empty
//! arena (`write_set/mod.rs`). Its reads, its scans and its commit merge the runs on disk
//! with the one in memory, the newest write of a key winning.
//!
//! A run is its records back to back, in (table name, key) order, one per key:
//!
//! ```text
//! offset  size  field
//!  0      4     table: its index in the write set's list of tables (u32, little-endian)
//!  4      4     key length
//!  8      4     value length, or 0xffff_ffff: a delete
//! 12      k     key
//! 12+k    v     value (none for a delete)
//! ```
//!
//! The records are grouped in *blocks* of about [`BLOCK_BYTES`] (a record never crosses a
//! block; a record larger than that is a block of its own). What is known of each block
//! lives in memory only: its offset and length, the CRC32C of its bytes, and its first
//! record's table and key (the index a lookup binary-searches: a get reads one block of a
//! run). A block read back whose checksum differs is `Corruption` naming the file and the
//! block's offset.
//!
//! In an encrypted database each block is sealed under the open's scratch key
//! (`crypt/scratch.rs`) as it is written, its offset bound, and its seal kept in memory with
//! the rest of what is known of it: the crc is then over the sealed bytes, and a block whose
//! tag fails is `Corruption` too.
//!
//! The files are scratch: written without a flush, never read by recovery, removed when
//! their run is merged into a larger one, when the transaction ends (commit or rollback),
//! and, left behind by a process that died, when the database opens ([`remove_leftovers`]).
//!
//! Memory: the index holds about `16 + key` bytes per block, 0.01 % of the bytes spilled at
//! 24-byte keys; a read of the runs holds one block per run.

use crate::FlushMethod;
use crate::checksum::crc32c;
use crate::crypt::{ScratchKey, ScratchSeal};
use crate::error::{Error, Result};
use crate::io::{Storage, StorageFile};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// Bytes of records a block holds before the next record starts a new one.
pub(super) const BLOCK_BYTES: usize = 256 << 10;

pub use crate::files::WRITE_SET_RUN_PREFIX as FILE_PREFIX;

/// A record's header: table, key length, value length.
const RECORD_HEADER_BYTES: usize = 12;

/// The value length of a delete.
const DELETED: u32 = u32::MAX;

/// Removes the spilled runs a process that died left in `dir`.
pub fn remove_leftovers(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for name in storage.list_dir(dir)? {
        if name.starts_with(FILE_PREFIX) {
            storage.remove(&dir.join(name))?;
        }
    }
    Ok(())
}

/// Where the transactions of one open database spill their runs.
#[derive(Debug)]
pub(crate) struct SpillTo {
    pub storage: Arc<dyn Storage>,
    pub dir: PathBuf,
    /// Bytes of its write set a transaction keeps in memory before it spills.
    pub bound: usize,
    /// Runs written so far: the next one's number, in its file's name.
    runs: AtomicU64,
    /// An encrypted database's scratch key: each block is sealed under it.
    pub key: Option<Arc<ScratchKey>>,
}

impl SpillTo {
    pub fn new(storage: Arc<dyn Storage>, dir: PathBuf, bound: usize) -> SpillTo {
        SpillTo {
            storage,
            dir,
            bound,
            runs: AtomicU64::new(0),
            key: None,
        }
    }

    /// Where runs spill with their blocks sealed under `key`.
    #[must_use]
    pub fn with_key(self, key: Option<Arc<ScratchKey>>) -> SpillTo {
        SpillTo { key, ..self }
    }
}

/// What is known of one block of a run.
#[derive(Debug)]
struct Block {
    offset: u64,
    len: u32,
    crc: u32,
    /// Sealed under the scratch key (an encrypted database's): what opens it.
    seal: Option<ScratchSeal>,
    first_table: u32,
    first_key: Box<[u8]>,
}

/// One sorted run on disk.
pub(super) struct Run {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    /// `None` only while it is dropped.
    file: Option<Box<dyn StorageFile>>,
    blocks: Vec<Block>,
    /// The scratch key its blocks are sealed under (an encrypted database's).
    key: Option<Arc<ScratchKey>>,
    /// Runs merged into this one, plus one: a run of level `l` is merged with the runs of
    /// the same level after it once there are [`super::RUNS_PER_LEVEL`] of them.
    pub level: u32,
    /// The tables it holds a record of, by index, ascending.
    pub tables: Vec<u32>,
    /// Bytes of records.
    pub bytes: u64,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Run({}, {} blocks, {} bytes, level {})",
            self.path.display(),
            self.blocks.len(),
            self.bytes,
            self.level
        )
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Closed before it is removed (Windows removes no open file). A failure leaves
        // scratch that the next open removes.
        drop(self.file.take());
        let _ = self.storage.remove(&self.path);
    }
}

/// Orders (table, key) pairs: tables by name, then keys as bytes.
pub(super) fn cmp_keys(names: &[String], a: (u32, &[u8]), b: (u32, &[u8])) -> Ordering {
    if a.0 == b.0 {
        a.1.cmp(b.1)
    } else {
        names[a.0 as usize]
            .as_bytes()
            .cmp(names[b.0 as usize].as_bytes())
            .then_with(|| a.1.cmp(b.1))
    }
}

/// A record parsed in a block's bytes: (table, key range, value range or `None`).
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub table: u32,
    key: std::ops::Range<usize>,
    value: Option<std::ops::Range<usize>>,
    /// Where the next record starts.
    end: usize,
}

impl Record {
    pub fn key<'b>(&self, block: &'b [u8]) -> &'b [u8] {
        &block[self.key.clone()]
    }

    pub fn value<'b>(&self, block: &'b [u8]) -> Option<&'b [u8]> {
        self.value.clone().map(|r| &block[r])
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// The record at `at` of a block whose checksum matched (its bytes are what this process
/// wrote, so they parse).
fn record_at(block: &[u8], at: usize) -> Record {
    let table = u32_at(block, at);
    let key_len = u32_at(block, at + 4) as usize;
    let value_len = u32_at(block, at + 8);
    let key = at + RECORD_HEADER_BYTES..at + RECORD_HEADER_BYTES + key_len;
    let (value, end) = if value_len == DELETED {
        (None, key.end)
    } else {
        let value = key.end..key.end + value_len as usize;
        let end = value.end;
        (Some(value), end)
    };
    assert!(end <= block.len(), "a spilled record past its block's end");
    Record {
        table,
        key,
        value,
        end,
    }
}

impl Run {
    /// Blocks written.
    #[cfg(test)]
    pub fn blocks_len(&self) -> usize {
        self.blocks.len()
    }

    /// Reads block `i` into `buf`, checked.
    fn read_block(&self, i: usize, buf: &mut Vec<u8>) -> Result<()> {
        let block = &self.blocks[i];
        let corrupt = |what| Error::Corruption {
            file: self.path.clone(),
            offset: block.offset,
            what,
        };
        buf.clear();
        buf.resize(block.len as usize, 0);
        let file = self.file.as_ref().expect("open until dropped");
        let mut done = 0;
        while done < buf.len() {
            let n = file.read_at(&mut buf[done..], block.offset + done as u64)?;
            if n == 0 {
                return Err(corrupt(
                    "a spilled run shorter than the blocks written to it",
                ));
            }
            done += n;
        }
        if crc32c(buf) != block.crc {
            return Err(corrupt(
                "a block of a spilled run reads back other than it was written",
            ));
        }
        if let Some(seal) = &block.seal {
            let key = self.key.as_ref().expect("a sealed block's run has the key");
            key.open(seal, &block_aad(block.offset), buf)
                .map_err(|_| corrupt("a block of a spilled run fails its authentication"))?;
        }
        Ok(())
    }

    /// The block that holds (table, key) if any block does: the last whose first record is
    /// at or below it.
    fn block_of(&self, names: &[String], table: u32, key: &[u8]) -> Option<usize> {
        let after = self.blocks.partition_point(|b| {
            cmp_keys(names, (b.first_table, &b.first_key), (table, key)) != Ordering::Greater
        });
        after.checked_sub(1)
    }

    /// This run's record of (`table`, `key`), read into `buf`: `None` if it has none.
    pub fn get(
        &self,
        names: &[String],
        table: u32,
        key: &[u8],
        buf: &mut Vec<u8>,
    ) -> Result<Option<Record>> {
        if self.tables.binary_search(&table).is_err() {
            return Ok(None);
        }
        let Some(i) = self.block_of(names, table, key) else {
            return Ok(None);
        };
        self.read_block(i, buf)?;
        let mut at = 0;
        while at < buf.len() {
            let record = record_at(buf, at);
            match cmp_keys(names, (record.table, record.key(buf)), (table, key)) {
                Ordering::Less => at = record.end,
                Ordering::Equal => return Ok(Some(record)),
                Ordering::Greater => break,
            }
        }
        Ok(None)
    }
}

/// Writes a run, block by block.
pub(super) struct RunWriter {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    file: Option<Box<dyn StorageFile>>,
    buf: Vec<u8>,
    blocks: Vec<Block>,
    first: Option<(u32, Box<[u8]>)>,
    offset: u64,
    tables: Vec<u32>,
    level: u32,
    key: Option<Arc<ScratchKey>>,
}

/// What a block's tag binds: its offset in the run.
fn block_aad(offset: u64) -> [u8; 8] {
    offset.to_le_bytes()
}

impl RunWriter {
    /// A new run (its file made now) of `level`.
    pub fn create(to: &SpillTo, level: u32) -> Result<RunWriter> {
        let number = to.runs.fetch_add(1, AtomicOrdering::Relaxed);
        let path = to.dir.join(format!("{FILE_PREFIX}{number}.tdb"));
        // Buffered: nothing here outlives the transaction, let alone the process.
        let file = to.storage.create(&path, FlushMethod::Fdatasync)?;
        Ok(RunWriter {
            storage: Arc::clone(&to.storage),
            path,
            file: Some(file),
            buf: Vec::with_capacity(BLOCK_BYTES),
            blocks: Vec::new(),
            first: None,
            offset: 0,
            tables: Vec::new(),
            level,
            key: to.key.clone(),
        })
    }

    /// Appends a record; records come in (table name, key) order, one per key.
    pub fn push(&mut self, table: u32, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let len = RECORD_HEADER_BYTES + key.len() + value.map_or(0, <[u8]>::len);
        if !self.buf.is_empty() && self.buf.len() + len > BLOCK_BYTES {
            self.end_block()?;
        }
        if self.first.is_none() {
            self.first = Some((table, key.into()));
        }
        if self.tables.last() != Some(&table) {
            self.tables.push(table);
        }
        self.buf.extend_from_slice(&table.to_le_bytes());
        let key_len = u32::try_from(key.len()).expect("keys are short");
        self.buf.extend_from_slice(&key_len.to_le_bytes());
        let value_len = match value {
            Some(v) => u32::try_from(v.len()).expect("values are checked below 4 GiB"),
            None => DELETED,
        };
        self.buf.extend_from_slice(&value_len.to_le_bytes());
        self.buf.extend_from_slice(key);
        if let Some(v) = value {
            self.buf.extend_from_slice(v);
        }
        Ok(())
    }

    fn end_block(&mut self) -> Result<()> {
        let (first_table, first_key) = self.first.take().expect("a block with a record");
        let file = self.file.as_ref().expect("open until finished");
        let seal = self
            .key
            .as_ref()
            .map(|key| key.seal(&block_aad(self.offset), &mut self.buf));
        file.write_at(&self.buf, self.offset)?;
        self.blocks.push(Block {
            offset: self.offset,
            len: u32::try_from(self.buf.len()).expect("a block is under 4 GiB"),
            crc: crc32c(&self.buf),
            seal,
            first_table,
            first_key,
        });
        self.offset += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// The run written.
    pub fn finish(mut self) -> Result<Run> {
        if !self.buf.is_empty() {
            self.end_block()?;
        }
        let mut tables = std::mem::take(&mut self.tables);
        tables.sort_unstable();
        tables.dedup();
        Ok(Run {
            storage: Arc::clone(&self.storage),
            path: std::mem::take(&mut self.path),
            file: self.file.take(),
            blocks: std::mem::take(&mut self.blocks),
            key: self.key.take(),
            level: self.level,
            tables,
            bytes: self.offset,
        })
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        // Unfinished (a write failed): its file goes.
        if let Some(file) = self.file.take() {
            drop(file);
            let _ = self.storage.remove(&self.path);
        }
    }
}

/// A run read in order from a position on, a block at a time, ascending or descending.
pub(super) struct RunCursor<'a> {
    run: &'a Run,
    /// Descending: from the seek's position down to the run's first record.
    backward: bool,
    /// The block in `buf`, and where its current record starts.
    block: usize,
    buf: Vec<u8>,
    head: Option<Record>,
    /// Descending only: where each record of the block in `buf` starts, and the index of the
    /// head's among them (a block is parsed forward once, then read back to front).
    starts: Vec<usize>,
    at: usize,
    /// Records of these tables are skipped (the transaction removed them after this run
    /// was written).
    skip_table: Vec<u32>,
}

/// Where a descending [`RunCursor`] starts: at the last record at or below (table, key), or
/// with no key at the table's last record.
pub(super) type SeekBack<'k> = (u32, Option<&'k [u8]>);

/// Orders (table, key) against a [`SeekBack`] position: `None` comes after every key of its
/// table.
fn cmp_back(names: &[String], a: (u32, &[u8]), to: SeekBack<'_>) -> Ordering {
    match to.1 {
        Some(key) => cmp_keys(names, a, (to.0, key)),
        None if a.0 == to.0 => Ordering::Less,
        None => cmp_keys(names, (a.0, &[]), (to.0, &[])),
    }
}

impl<'a> RunCursor<'a> {
    /// A cursor at the first record at or above (`table`, `key`) (`None`: the run's first),
    /// skipping the records of the tables in `skip`.
    pub fn seek(
        run: &'a Run,
        names: &[String],
        from: Option<(u32, &[u8])>,
        skip: Vec<u32>,
    ) -> Result<RunCursor<'a>> {
        let mut cursor = RunCursor::on(run, false, skip);
        let start = match from {
            Some((table, key)) => run.block_of(names, table, key).unwrap_or(0),
            None => 0,
        };
        cursor.load(start)?;
        if let Some((table, key)) = from {
            while let Some(head) = &cursor.head
                && cmp_keys(names, (head.table, head.key(&cursor.buf)), (table, key))
                    == Ordering::Less
            {
                cursor.advance()?;
            }
        }
        cursor.skip_removed()?;
        Ok(cursor)
    }

    /// A descending cursor at the last record at or below `to` (`None`: the run's last),
    /// skipping the records of the tables in `skip`.
    pub fn seek_back(
        run: &'a Run,
        names: &[String],
        to: Option<SeekBack<'_>>,
        skip: Vec<u32>,
    ) -> Result<RunCursor<'a>> {
        let mut cursor = RunCursor::on(run, true, skip);
        let block = match to {
            Some(to) => run
                .blocks
                .partition_point(|b| {
                    cmp_back(names, (b.first_table, &b.first_key), to) != Ordering::Greater
                })
                .checked_sub(1),
            None => run.blocks.len().checked_sub(1),
        };
        let Some(block) = block else {
            return Ok(cursor);
        };
        cursor.load(block)?;
        if let Some(to) = to {
            while let Some(head) = &cursor.head
                && cmp_back(names, (head.table, head.key(&cursor.buf)), to) == Ordering::Greater
            {
                cursor.step()?;
            }
        }
        cursor.skip_removed()?;
        Ok(cursor)
    }

    fn on(run: &'a Run, backward: bool, skip: Vec<u32>) -> RunCursor<'a> {
        RunCursor {
            run,
            backward,
            block: 0,
            buf: Vec::new(),
            head: None,
            starts: Vec::new(),
            at: 0,
            skip_table: skip,
        }
    }

    /// Reads block `i` (if there is one) and stands on its first record (descending: its
    /// last).
    fn load(&mut self, i: usize) -> Result<()> {
        self.block = i;
        if i >= self.run.blocks.len() {
            self.head = None;
            self.buf = Vec::new();
            return Ok(());
        }
        self.run.read_block(i, &mut self.buf)?;
        if self.backward {
            self.starts.clear();
            let mut at = 0;
            while at < self.buf.len() {
                self.starts.push(at);
                at = record_at(&self.buf, at).end;
            }
            self.at = self.starts.len() - 1;
            self.head = Some(record_at(&self.buf, self.starts[self.at]));
        } else {
            self.head = Some(record_at(&self.buf, 0));
        }
        Ok(())
    }

    fn skip_removed(&mut self) -> Result<()> {
        while let Some(head) = &self.head
            && self.skip_table.contains(&head.table)
        {
            self.step()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        let Some(head) = &self.head else {
            return Ok(());
        };
        if self.backward {
            if self.at > 0 {
                self.at -= 1;
                self.head = Some(record_at(&self.buf, self.starts[self.at]));
                Ok(())
            } else if self.block > 0 {
                self.load(self.block - 1)
            } else {
                self.head = None;
                Ok(())
            }
        } else if head.end < self.buf.len() {
            self.head = Some(record_at(&self.buf, head.end));
            Ok(())
        } else {
            self.load(self.block + 1)
        }
    }

    /// Moves to the next record (descending: the one before).
    pub fn advance(&mut self) -> Result<()> {
        self.step()?;
        self.skip_removed()
    }

    /// The record it stands on: (table, key, value or `None`).
    #[expect(
        clippy::type_complexity,
        reason = "a record's three fields, named in the doc"
    )]
    pub fn head(&self) -> Option<(u32, &[u8], Option<&[u8]>)> {
        let head = self.head.as_ref()?;
        Some((head.table, head.key(&self.buf), head.value(&self.buf)))
    }
}
