//! Following the log as another reader: the change feed reads records from a position up to
//! a limit the writer published as durable (the log's durable lsn: the end of the last
//! flushed block, which a record may cross) (`feed.rs`), in this process or another, reading
//! only the bytes it has not read yet, segment after segment.
//!
//! | at the position                                   | decision                              |
//! |---------------------------------------------------|---------------------------------------|
//! | a valid `Data` record ending at or before `limit` | return it; go on after it             |
//! | a record that runs past `limit`, a newer segment begins here | go on in it (a torn record a killed writer left, the reopened log based here) |
//! | a record that runs past `limit`                   | stop there: not durable yet (the writer's durable mark is a block boundary, which a record may cross) |
//! | a valid `Pad`                                     | skip it                               |
//! | a valid `SegmentEnd`                              | go on at the next segment's base      |
//! | no valid record, but a newer segment begins here  | go on in it (a reopened log starts a new segment where the old one's records ended) |
//! | anything else, below `limit`                      | `Error::Corruption` naming file and offset: what the writer published as durable does not validate (its segment was reused under a consumer it dropped, or the log is damaged) |
//! | no segment holds the position, a later one exists | `Error::LogMissing` naming that segment and the lsns gone (never skipped) |
//! | no segment holds the position                     | `Error::FeedUnavailable`: the log no longer holds it |
//!
//! An encrypted database's log (sealed segments) is followed with its keys
//! ([`LogFollower::with_keys`]): each `Data` record is opened, and one whose tag fails is
//! `Error::Corruption`, whatever the limit.
//!
//! The segment holding the position is the one whose valid header (naming the file's
//! generation) covers it; a segment recycled while it is read gets a new generation, and its
//! old records stop validating (their checksums are seeded with the generation), so a reused
//! segment is never mistaken for the old one.

use super::Lsn;
use super::reader::WalRecord;
use super::record::{self, RecordKind};
use super::segment::{HeaderState, SegmentHeader, parse_segment_name};
use super::slot;
use crate::FlushMethod;
use crate::crypt::{DatabaseKeys, RecordOpener};
use crate::error::{Error, Result};
use crate::io::{Storage, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// True when the record starting at `rest[0]` would run past the end of `rest`: its header
/// is cut, or its length field reaches beyond.
fn straddles(rest: &[u8]) -> bool {
    rest.len() < record::HEADER_BYTES
        || u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes")) as usize > rest.len()
}

/// The payload of the record `rec`, its tag checked (and a `Data` record's opened) with
/// `opener` when it is sealed; a tag that fails is `Corruption` at `offset` of `path`.
fn payload_checked(
    rec: record::RecordRef<'_>,
    opener: Option<&RecordOpener>,
    (path, offset): (&Path, u64),
) -> Result<Vec<u8>> {
    let Some(opener) = opener.filter(|_| rec.sealed.is_some()) else {
        return Ok(rec.payload.to_vec());
    };
    let mut plain = Vec::new();
    record::open(rec, opener, &mut plain).map_err(|fault| Error::Corruption {
        file: path.to_path_buf(),
        offset,
        what: if fault == record::RecordFault::BadTag {
            record::TAG_FAILED
        } else {
            "a sealed log record does not open"
        },
    })?;
    Ok(plain)
}

/// Bytes read from a segment's start to decode its header (the largest log block).
const HEADER_READ_BYTES: usize = 4096;

/// A reader that follows the log from a position.
#[derive(Debug)]
pub struct LogFollower {
    storage: Arc<dyn Storage>,
    /// The log directory.
    dir: PathBuf,
    /// The lsn of the next record to read.
    position: u64,
    current: Option<Current>,
    /// An encrypted database's keys, which open its sealed records.
    keys: Option<Arc<DatabaseKeys>>,
}

#[derive(Debug)]
struct Current {
    header: SegmentHeader,
    path: PathBuf,
    file: Box<dyn StorageFile>,
}

impl Current {
    fn covers(&self, lsn: u64) -> bool {
        (self.header.base_lsn..self.header.base_lsn + self.header.capacity()).contains(&lsn)
    }
}

impl LogFollower {
    /// A follower of the log in `dir` from `position` (a record boundary).
    #[must_use]
    pub fn new(storage: Arc<dyn Storage>, dir: &Path, position: Lsn) -> Self {
        LogFollower {
            storage,
            dir: dir.to_path_buf(),
            position: position.0,
            current: None,
            keys: None,
        }
    }

    /// This follower, opening sealed records with `keys` (an encrypted database's).
    #[must_use]
    pub fn with_keys(self, keys: Option<Arc<DatabaseKeys>>) -> Self {
        LogFollower { keys, ..self }
    }

    /// The lsn of the next record it reads.
    #[must_use]
    pub fn position(&self) -> Lsn {
        Lsn(self.position)
    }

    /// The `Data` records from the position up to `limit` (a record boundary at or below
    /// what the writer made durable), stopping once about `max_bytes` of payload were read.
    pub fn read(&mut self, limit: Lsn, max_bytes: usize) -> Result<Vec<WalRecord>> {
        let mut out = Vec::new();
        let mut payload_bytes = 0;
        while self.position < limit.0 && payload_bytes < max_bytes {
            let header = self.segment()?.header;
            let position = self.position;
            let current = self.current.as_ref().expect("segment() opened it");
            let end = limit.0.min(header.base_lsn + header.capacity());
            let block = u64::from(header.log_block_bytes);
            let from = block + (position - header.base_lsn);
            let len = usize::try_from(end - position).expect("a segment fits in memory");
            // The tail slots first, then the home bytes (`slot::read_from`): a tail block's
            // bytes are in a slot until its home is written full.
            let copies = slot::read_from(&*current.file, &header)?;
            let mut bytes = vec![0; len];
            let n = current.file.read_at(&mut bytes, from)?;
            bytes.truncate(n);
            copies.lay(&mut bytes, from, &header);
            let path = current.path.clone();
            let opener = self.opener(&header, &path)?;
            let mut at = 0;
            let mut next_segment = false;
            while self.position < end && payload_bytes < max_bytes {
                let sealed = header.seal.is_some();
                let decoded =
                    record::decode_in(&bytes[at..], header.generation, self.position, sealed);
                if decoded.is_err() && n == len && straddles(&bytes[at..]) {
                    // The writer's durable mark is a block boundary, not a record's end: a
                    // record that goes on past it is not durable yet. Read it next time;
                    // unless the log went on in a newer segment based here (a reopened log
                    // after a torn record, whose garbage length looks like a record running
                    // past the mark): then that segment holds the position, and the
                    // follower, which opened the old one before, would wait for ever.
                    let old_generation = header.generation;
                    self.current = None;
                    if self.segment()?.header.generation > old_generation {
                        next_segment = true;
                        break;
                    }
                    return Ok(out);
                }
                let Ok(rec) = decoded else {
                    // A reopened log goes on in a new segment whose base is where the old
                    // one's records ended (no `SegmentEnd` in the old one).
                    let old_generation = header.generation;
                    self.current = None;
                    if self.segment()?.header.generation > old_generation {
                        next_segment = true;
                        break;
                    }
                    return Err(Error::Corruption {
                        file: path,
                        offset: from + at as u64,
                        what: "a log record below the lsn its writer published as durable does \
                               not validate: its segment was reused (a dropped feed consumer) \
                               or the log is damaged",
                    });
                };
                // Every sealed record's tag is checked (a pad's too: a `Data` record turned
                // into one would be skipped); a `Data` record's payload is opened.
                let offset = from + at as u64;
                let checked = (rec.sealed.is_some() || rec.kind == RecordKind::Data)
                    .then(|| payload_checked(rec, opener.as_ref(), (&path, offset)))
                    .transpose()?;
                match rec.kind {
                    RecordKind::Data => {
                        let payload = checked.expect("a Data record's payload, checked");
                        payload_bytes += payload.len();
                        out.push(WalRecord {
                            lsn: Lsn(rec.lsn),
                            end_lsn: Lsn(rec.lsn + rec.len as u64),
                            payload,
                        });
                    }
                    RecordKind::Pad => {}
                    RecordKind::SegmentEnd => next_segment = true,
                }
                self.position += rec.len as u64;
                at += rec.len;
                if next_segment {
                    self.position = header.base_lsn + header.capacity();
                    self.current = None;
                    break;
                }
                assert!(
                    self.position <= end,
                    "a record crosses the published durable lsn {}",
                    limit.0
                );
            }
            if !next_segment && self.position == header.base_lsn + header.capacity() {
                self.current = None;
            }
        }
        Ok(out)
    }

    /// The opener of the records of segment `header` (at `path`): `None` when it is not
    /// sealed; an error when it is and this follower has no keys.
    fn opener(&self, header: &SegmentHeader, path: &Path) -> Result<Option<RecordOpener>> {
        super::reader::check_sealed(self.keys.as_deref(), header, path)?;
        match (header.seal, &self.keys) {
            (None, _) => Ok(None),
            (Some(seal), Some(keys)) => {
                Ok(Some(RecordOpener::new(keys, &seal.salt, header.generation)))
            }
            (Some(_), None) => Err(Error::InvalidOptions(format!(
                "{} is sealed (an encrypted database's log): it is followed with the \
                 database's key",
                path.display()
            ))),
        }
    }

    /// The segment holding the position, opened.
    fn segment(&mut self) -> Result<&Current> {
        if self
            .current
            .as_ref()
            .is_some_and(|c| c.covers(self.position))
        {
            return Ok(self.current.as_ref().expect("checked"));
        }
        self.current = None;
        let mut best: Option<Current> = None;
        // The valid segment that begins first after the position, if none holds it.
        let mut after: Option<(u64, PathBuf)> = None;
        for name in self.storage.list_dir(&self.dir)? {
            let Some(generation) = parse_segment_name(&name) else {
                continue;
            };
            if best
                .as_ref()
                .is_some_and(|b| b.header.generation > generation)
            {
                continue;
            }
            let path = self.dir.join(&name);
            let file = match self.storage.open(&path, FlushMethod::Fdatasync) {
                Ok(file) => file,
                // Recycled (renamed to a newer generation) or removed since the listing: a
                // free segment, never the one a reader's position is in, which the writer
                // keeps while it is needed.
                Err(e) if e.raw_os_error() == Some(crate::io::errno::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            let mut bytes = vec![0; HEADER_READ_BYTES];
            let n = file.read_at(&mut bytes, 0)?;
            bytes.truncate(n);
            let candidate = match SegmentHeader::decode(&bytes, &path) {
                Ok(HeaderState::Valid(header)) if header.generation == generation => {
                    Current { header, path, file }
                }
                // Free or being prepared: not where the log is.
                _ => continue,
            };
            if candidate.covers(self.position) {
                best = Some(candidate);
            } else if candidate.header.base_lsn > self.position
                && after
                    .as_ref()
                    .is_none_or(|(base, _)| candidate.header.base_lsn < *base)
            {
                after = Some((candidate.header.base_lsn, candidate.path));
            }
        }
        if best.is_none()
            && let Some((base, path)) = after
        {
            if crate::mutants::active("feed-skips-missing-log") {
                self.position = base;
                return self.segment();
            }
            // The log goes on after a gap: the records from the position to `base` are gone
            // (a segment removed under a consumer behind). Never skipped: the consumer would
            // miss transactions in silence.
            return Err(Error::LogMissing {
                file: path,
                from_lsn: self.position,
                to_lsn: base,
            });
        }
        let dir = self.dir.parent().unwrap_or(&self.dir).to_path_buf();
        let found = best.ok_or_else(|| Error::FeedUnavailable {
            dir,
            lsn: self.position,
            reason: "the log no longer holds this position (its segment was reused): the \
                     feed fell behind what the log keeps"
                .to_owned(),
        })?;
        Ok(self.current.insert(found))
    }
}
