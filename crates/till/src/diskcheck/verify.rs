//! `till diskcheck verify`: what survived, against every acknowledgement the listener holds.
//!
//! `raw`: write `seq` went to slot `seq % slots`, so after `n` acknowledged writes each slot
//! `s` must hold the newest acknowledged write to it, `e = s + ((n - 1 - s) / slots) * slots`,
//! or a later one (a write made, never acknowledged, is allowed to land). Every sector holding
//! `e` or later: present. Nothing of `e` or later: lost. Some sectors older or zero, some `e`
//! or later: torn. A sector that is not a valid sector of the run and slot: corrupt. Only the
//! newest acknowledged write of each slot can be checked (the older ones were overwritten by
//! the writer itself), so `checked` is at most the number of slots.
//!
//! `db`: opening the database runs recovery; then every acknowledged key must hold its value,
//! and the trees must check. A `sync` commit lost is a violation. `buffered` and `lazy` promise
//! durability only once the log's flush interval has passed, so a commit the listener
//! recorded within the flush interval plus [`GRACE`] before the last recorded acknowledgement
//! (about when the power went) may be lost: counted apart, not a violation.

use super::block::{self, Found};
use super::run::{self, RunFile};
use super::wire::{self, Mode, Record};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::Arc;
use tilldb::io::Storage;
use tilldb::{Db, FlushMethod, Options};

/// Time allowed beyond the flush interval for the background flush itself to finish.
pub const GRACE_MS: u64 = 1000;
const FIRST_LOST_SHOWN: usize = 10;

/// One stream's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamReport {
    pub stream: String,
    pub method: String,
    pub durability: Option<String>,
    /// Acknowledgements the listener recorded.
    pub acknowledged: u64,
    /// Acknowledged writes that could be checked.
    pub checked: u64,
    pub present: u64,
    /// Acknowledged and gone, beyond what the durability level allows.
    pub lost: u64,
    /// `buffered`/`lazy`: lost within the flush interval before the cut, as allowed.
    pub lost_within_window: u64,
    pub torn: u64,
    pub corrupt: u64,
    /// The first lost (or torn, or corrupt) acknowledged sequence numbers.
    pub first_lost: Vec<u64>,
    pub notes: Vec<String>,
}

impl StreamReport {
    /// Acknowledged writes not found whole, beyond what the durability level allows. A
    /// `nosync` stream has none: it never flushes, so what it loses is lost by design and
    /// says nothing of the disk ([`StreamReport::unflushed_by_design`]).
    pub fn violations(&self) -> u64 {
        if self.unflushed_by_design() {
            return 0;
        }
        self.lost + self.torn + self.corrupt
    }

    /// True for a stream that never asks the disk to flush (`nosync`): a power cut may take
    /// any of its writes, whatever the disk. Its losses show that the cut dropped the
    /// disk's cache (a control), not that the disk lies.
    pub fn unflushed_by_design(&self) -> bool {
        self.method == FlushMethod::NoSync.to_string()
    }

    /// Acknowledged writes not found whole, whatever the reason.
    fn not_whole(&self) -> u64 {
        self.lost + self.torn + self.corrupt
    }

    fn missing(&mut self, seq: u64) {
        if self.first_lost.len() < FIRST_LOST_SHOWN {
            self.first_lost.push(seq);
        }
    }
}

/// Asks the listener at `from` for every record of `run`.
pub fn fetch(from: &str, run: &str) -> Result<Vec<Record>, String> {
    let cannot =
        |e: std::io::Error| format!("cannot fetch run {run} from the listener at {from}: {e}");
    let conn = std::net::TcpStream::connect(from).map_err(cannot)?;
    (&conn)
        .write_all(format!("FETCH {run}\n").as_bytes())
        .map_err(cannot)?;
    let mut input = BufReader::new(conn);
    let mut line = String::new();
    input.read_line(&mut line).map_err(cannot)?;
    let head = line.trim_end().to_string();
    if let Some(why) = head.strip_prefix("ERR ") {
        return Err(format!(
            "the listener at {from}: {why}; is this the right directory and listener?"
        ));
    }
    let count: usize = head
        .strip_prefix(&format!("RUN {run} "))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the listener at {from} answered {head:?}"))?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        line.clear();
        input.read_line(&mut line).map_err(cannot)?;
        let (name, len) = line
            .trim_end()
            .strip_prefix("STREAM ")
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(name, len)| Some((name.to_string(), len.parse::<usize>().ok()?)))
            .ok_or_else(|| format!("the listener at {from} answered {:?}", line.trim_end()))?;
        let mut bytes = vec![0; len];
        input.read_exact(&mut bytes).map_err(cannot)?;
        records.push(wire::parse_record(
            &bytes,
            &format!("{from}: record of run {run} stream {name}"),
        )?);
    }
    line.clear();
    input.read_line(&mut line).map_err(cannot)?;
    if line.trim_end() != "END" {
        return Err(format!(
            "the listener at {from} ended its answer with {:?}",
            line.trim_end()
        ));
    }
    Ok(records)
}

/// Checks every stream of the run in `dir` against `records`. `db_options` opens `db`
/// streams (their own flush method comes from their header).
pub fn verify(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    run_file: &RunFile,
    records: &[Record],
    db_options: &Options,
) -> Result<Vec<StreamReport>, String> {
    let run = wire::parse_run_name(&run_file.run).ok_or_else(|| {
        format!(
            "{}: run id {:?} is not 16 hex digits",
            run::RUN_FILE,
            run_file.run
        )
    })?;
    let last_recorded_ms = records
        .iter()
        .filter_map(Record::last_time)
        .max()
        .unwrap_or(0);
    let mut reports = Vec::new();
    for meta in &run_file.streams {
        let record = match records.iter().find(|r| r.meta.stream == meta.stream) {
            Some(record) if record.meta != *meta => {
                return Err(format!(
                    "the listener's record of stream {} differs from {}: the directory and \
                     the listener's run do not belong together",
                    meta.stream,
                    dir.join(run::RUN_FILE).display()
                ));
            }
            Some(record) => Some(record),
            None => None,
        };
        let mut report = StreamReport {
            stream: meta.stream.clone(),
            method: meta.method.clone(),
            durability: meta.durability.clone(),
            acknowledged: record.map_or(0, |r| r.acknowledged),
            ..StreamReport::default()
        };
        if record.is_none() {
            report.notes.push(
                "the listener holds no record of this stream: nothing was acknowledged".into(),
            );
        }
        let path = dir.join(&meta.path);
        match meta.mode {
            Mode::Raw => verify_raw(
                &**storage,
                &path,
                run,
                meta.block_bytes,
                meta.slots,
                &mut report,
            )?,
            Mode::Db => {
                let window_ms = match meta.durability.as_deref() {
                    Some("sync") | None => 0,
                    Some(_) => meta.flush_interval_ms.unwrap_or(0) + GRACE_MS,
                };
                let allowed_after = last_recorded_ms.saturating_sub(window_ms);
                let allowed = |seq: u64| {
                    window_ms > 0 && record.is_some_and(|r| r.time_of(seq) >= allowed_after)
                };
                verify_db(storage, &path, run, &allowed, db_options, &mut report);
            }
        }
        reports.push(report);
    }
    Ok(reports)
}

fn verify_raw(
    storage: &dyn Storage,
    path: &Path,
    run: u64,
    block_bytes: u32,
    slots: u64,
    report: &mut StreamReport,
) -> Result<(), String> {
    let acknowledged = report.acknowledged;
    report.checked = acknowledged.min(slots);
    if report.checked == 0 {
        return Ok(());
    }
    let file = match storage.open(path, FlushMethod::Fdatasync) {
        Ok(file) => Some(file),
        Err(e) => {
            report
                .notes
                .push(format!("cannot open {}: {e}", path.display()));
            None
        }
    };
    let mut block = vec![0; block_bytes as usize];
    let mut damaged = Vec::new();
    for slot in 0..report.checked {
        let expected = slot + ((acknowledged - 1 - slot) / slots) * slots;
        let offset = slot * u64::from(block_bytes);
        block.fill(0);
        if let Some(file) = &file {
            file.read_at(&mut block, offset)
                .map_err(|e| format!("cannot read {} at byte {offset}: {e}", path.display()))?;
        }
        let found = block::decode(
            &block,
            run,
            u32::try_from(slot).expect("fewer than 2^32 slots"),
        );
        let verdict = match found {
            Found::Intact(seq) if seq >= expected => None,
            // Later writes, never acknowledged, torn over the acknowledged one: allowed.
            Found::Torn { oldest, .. } if oldest.is_some_and(|o| o >= expected) => None,
            Found::Intact(_) | Found::Empty => Some(Kind::Lost),
            Found::Torn { newest, .. } if newest < expected => Some(Kind::Lost),
            Found::Torn { .. } => Some(Kind::Torn),
            Found::Corrupt { offset: at } => {
                if report.corrupt == 0 {
                    report.notes.push(format!(
                        "{}: at byte {}: {found}",
                        path.display(),
                        offset + at as u64
                    ));
                }
                Some(Kind::Corrupt)
            }
        };
        match verdict {
            None => report.present += 1,
            Some(kind) => damaged.push((expected, kind)),
        }
    }
    damaged.sort_unstable();
    for (seq, kind) in damaged {
        match kind {
            Kind::Lost => report.lost += 1,
            Kind::Torn => report.torn += 1,
            Kind::Corrupt => report.corrupt += 1,
        }
        report.missing(seq);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Lost,
    Torn,
    Corrupt,
}

fn verify_db(
    storage: &Arc<dyn Storage>,
    path: &Path,
    run: u64,
    allowed: &dyn Fn(u64) -> bool,
    db_options: &Options,
    report: &mut StreamReport,
) {
    let db = match Db::open_with_storage(Arc::clone(storage), path, db_options.clone()) {
        Ok(db) => db,
        Err(e) => {
            report.corrupt = report.acknowledged;
            report.checked = report.acknowledged;
            report
                .notes
                .push(format!("the database does not open: {e}"));
            return;
        }
    };
    report.checked = report.acknowledged;
    for seq in 0..report.acknowledged {
        match db.get(&run::db_key(run, seq)) {
            Ok(Some(value)) if value == run::db_value(run, seq) => report.present += 1,
            Ok(Some(_)) => {
                report.corrupt += 1;
                report.missing(seq);
            }
            Ok(None) if allowed(seq) => report.lost_within_window += 1,
            Ok(None) => {
                report.lost += 1;
                report.missing(seq);
            }
            Err(e) => {
                report.corrupt += 1;
                report.missing(seq);
                if report.notes.len() < 3 {
                    report.notes.push(format!("write {seq}: {e}"));
                }
            }
        }
    }
    if let Err(e) = db.check() {
        report.corrupt += 1;
        report
            .notes
            .push(format!("the database does not check: {e}"));
    }
    if let Err(e) = db.close() {
        report.notes.push(format!("closing the database: {e}"));
    }
}

/// The verdicts a shop can act on, one line each; the first says whether all is well.
pub fn verdicts(reports: &[StreamReport]) -> Vec<String> {
    // Only a method that flushes is advice: `nosync` keeps nothing across a power cut.
    let good: Vec<&str> = reports
        .iter()
        .filter(|r| r.violations() == 0 && r.checked > 0 && !r.unflushed_by_design())
        .map(|r| r.method.as_str())
        .collect();
    let mut lines = Vec::new();
    for r in reports.iter().filter(|r| r.violations() > 0) {
        let what = match (r.lost, r.torn, r.corrupt) {
            (lost, 0, 0) => format!("lost {lost} acknowledged writes"),
            (lost, torn, corrupt) => {
                format!("lost {lost}, tore {torn} and corrupted {corrupt} acknowledged writes")
            }
        };
        let instead = if good.is_empty() {
            "turn the disk's write cache off (hdparm -W 0 on Linux; Device Manager, the disk's \
             Policies tab, on Windows) and run the check again"
                .to_string()
        } else {
            format!("use {} or turn the write cache off", good.join(" or "))
        };
        lines.push(format!(
            "method {} ({}) {what}: this disk does not honour it; {instead}",
            r.method, r.stream
        ));
    }
    for r in reports.iter().filter(|r| r.unflushed_by_design()) {
        let gone = r.not_whole();
        lines.push(if gone > 0 {
            format!(
                "method {} ({}): {gone} of {} acknowledged writes gone, unflushed by design \
                 (nosync never flushes): not a verdict on this disk, only a sign that the cut \
                 dropped its cache",
                r.method, r.stream, r.checked
            )
        } else {
            format!(
                "method {} ({}): every write survived although nosync never flushes: the cut \
                 may have come after the disk wrote its cache out (cut sooner after the \
                 writes, or cut the power rather than reboot)",
                r.method, r.stream
            )
        });
    }
    for r in reports.iter().filter(|r| r.lost_within_window > 0) {
        lines.push(format!(
            "{}: {} {} commits made in the last flush interval before the cut are gone, as \
             that durability level allows (only `sync` survives a power cut at once)",
            r.stream,
            r.lost_within_window,
            r.durability.as_deref().unwrap_or("?")
        ));
    }
    let acknowledged: u64 = reports.iter().map(|r| r.acknowledged).sum();
    let violations: u64 = reports.iter().map(StreamReport::violations).sum();
    let first = if acknowledged == 0 {
        "nothing was acknowledged in this run: nothing to verify".to_string()
    } else if violations == 0 {
        "every acknowledged write that could be checked is present: this disk honoured every \
         method tested in this power cut (one cut is a sample, not a proof: repeat it)"
            .to_string()
    } else {
        format!("{violations} acknowledged writes are missing or damaged")
    };
    lines.insert(0, first);
    lines
}
