//! `till diskcheck run`: one writer thread per flush method, each sending the listener every
//! acknowledgement its method gave before it writes again.
//!
//! The run's directory holds `diskcheck.json` (the run id, its mode, the listener and each
//! stream's [`StreamMeta`]), made durable before the first write, and per stream either
//! `raw-<method>.dat` (blocks, `block.rs`) or `db-<method>/` (a tilldb database whose keys are
//! [`db_key`] and values [`db_value`]).

use super::block;
use super::wire::{self, MAX_UNRECORDED, Mode, StreamMeta};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tilldb::io::{AlignedBuf, Storage, StorageFile};
use tilldb::{Db, Durability, FlushMethod, Options};

/// The name of the run's description in its directory.
pub const RUN_FILE: &str = "diskcheck.json";

/// `diskcheck.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFile {
    pub format: u32,
    pub run: String,
    pub mode: Mode,
    pub listener: String,
    pub streams: Vec<StreamMeta>,
}

/// What a run writes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub run: u64,
    pub mode: Mode,
    pub methods: Vec<FlushMethod>,
    /// Methods were named by the user: one that cannot be used is an error, not skipped.
    pub methods_explicit: bool,
    pub durability: Durability,
    /// `raw` mode: bytes per stream file.
    pub file_bytes: u64,
    /// `db` mode: the options of each database (its flush method is set per stream).
    pub db_options: Options,
    pub listener: String,
}

/// When the writers stop.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// Never on their own: until the power goes (or the process is killed).
    Never,
    /// After this long.
    After(Duration),
    /// After this many writes per stream.
    Writes(u64),
}

/// A new run id: the clock and the process, mixed.
pub fn new_run_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut x = u64::try_from(nanos & u128::from(u64::MAX)).expect("masked")
        ^ (u64::from(std::process::id()) << 32);
    // splitmix64's finalizer: nearby clocks give far-apart ids.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The key of write `seq` of run `run` in `db` mode.
pub fn db_key(run: u64, seq: u64) -> Vec<u8> {
    format!("diskcheck/{}/{seq:016x}", wire::run_name(run)).into_bytes()
}

/// The value of write `seq` of run `run` in `db` mode: 100 bytes only that write has.
pub fn db_value(run: u64, seq: u64) -> Vec<u8> {
    let mut value = format!("run {} write {seq} ", wire::run_name(run)).into_bytes();
    let mut x = run ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while value.len() < 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        value.push(b'a' + u8::try_from(x % 26).expect("below 26"));
    }
    value
}

/// The stream name of `method` in `mode`.
pub fn stream_name(mode: Mode, method: FlushMethod) -> String {
    format!("{}-{}", mode.name(), method.name())
}

/// Prepares every stream (files preallocated and flushed, databases created) and writes
/// `diskcheck.json` durably. A method that cannot be used here is skipped with a note unless
/// the user named it. Returns the run's description and the notes.
pub fn prepare(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    plan: &Plan,
) -> Result<(RunFile, Vec<String>), String> {
    let io = |what: &str, e: tilldb::Error| format!("{what}: {e}");
    storage
        .create_dir_all(dir)
        .map_err(|e| io("cannot create the run directory", e))?;
    let run_path = dir.join(RUN_FILE);
    if storage
        .exists(&run_path)
        .map_err(|e| io("cannot read", e))?
    {
        return Err(format!(
            "{} exists: this directory holds an earlier run; verify it (till diskcheck verify \
             --from HOST:PORT {}) or start over with --replace",
            run_path.display(),
            dir.display()
        ));
    }
    let facts = storage
        .device_facts(dir)
        .map_err(|e| io("cannot read the device's facts", e))?;
    let block_bytes = facts.direct_align().max(4096);
    let slots = (plan.file_bytes / u64::from(block_bytes)).max(16);
    let mut streams = Vec::new();
    let mut notes = Vec::new();
    for &method in &plan.methods {
        let stream = stream_name(plan.mode, method);
        let path = match plan.mode {
            Mode::Raw => format!("{stream}.dat"),
            Mode::Db => stream.clone(),
        };
        let prepared = match plan.mode {
            Mode::Raw => preallocate(&**storage, &dir.join(&path), method, block_bytes, slots),
            Mode::Db => Db::open_with_storage(
                Arc::clone(storage),
                &dir.join(&path),
                db_options(&plan.db_options, method),
            )
            .and_then(Db::close)
            .map_err(|e| e.to_string()),
        };
        if let Err(e) = prepared {
            if plan.methods_explicit {
                return Err(format!("method {method}: {e}"));
            }
            notes.push(format!("skipping method {method}: {e}"));
            continue;
        }
        streams.push(StreamMeta {
            run: wire::run_name(plan.run),
            stream,
            mode: plan.mode,
            method: method.name().to_string(),
            durability: (plan.mode == Mode::Db).then(|| plan.durability.name().to_string()),
            flush_interval_ms: (plan.mode == Mode::Db).then(|| {
                u64::try_from(plan.db_options.wal.flush_interval.as_millis()).unwrap_or(u64::MAX)
            }),
            block_bytes,
            slots,
            path,
            host: crate::platform::host_name(),
            dir: dir.display().to_string(),
            started_unix_ms: wire::unix_ms(),
        });
    }
    if streams.is_empty() {
        return Err(format!(
            "no flush method can be used in {}: {}",
            dir.display(),
            notes.join("; ")
        ));
    }
    let run_file = RunFile {
        format: 1,
        run: wire::run_name(plan.run),
        mode: plan.mode,
        listener: plan.listener.clone(),
        streams,
    };
    tilldb::io::write_file_durably(
        &**storage,
        &run_path,
        &serde_json::to_vec_pretty(&run_file).expect("serializes"),
    )
    .map_err(|e| io("cannot write the run's description", e))?;
    Ok((run_file, notes))
}

/// A stream database's options: the run's, with this stream's flush method.
pub fn db_options(base: &Options, method: FlushMethod) -> Options {
    Options {
        flush_method: Some(method),
        ..base.clone()
    }
}

/// Creates `path` with `slots` zeroed blocks and makes it durable, name included.
fn preallocate(
    storage: &dyn Storage,
    path: &Path,
    method: FlushMethod,
    block_bytes: u32,
    slots: u64,
) -> Result<(), String> {
    let file = storage
        .create(path, method)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.allocate_zeroed(0, slots * u64::from(block_bytes))
        .and_then(|()| file.flush())
        .and_then(|()| storage.flush_dir(&tilldb::io::parent_dir(path)))
        .map_err(|e| format!("cannot preallocate {}: {e}", path.display()))
}

/// Reads `diskcheck.json` of `dir`.
pub fn read_run_file(storage: &dyn Storage, dir: &Path) -> Result<RunFile, String> {
    let path = dir.join(RUN_FILE);
    if !storage.exists(&path).map_err(|e| e.to_string())? {
        return Err(format!(
            "{} does not exist: {} is not the directory of a diskcheck run (the one given to \
             `till diskcheck run`)",
            path.display(),
            dir.display()
        ));
    }
    let file = storage
        .open(&path, FlushMethod::Fdatasync)
        .map_err(|e| e.to_string())?;
    let len = usize::try_from(file.len().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let mut bytes = vec![0; len];
    let n = file.read_at(&mut bytes, 0).map_err(|e| e.to_string())?;
    bytes.truncate(n);
    serde_json::from_slice(&bytes).map_err(|e| {
        let offset = byte_offset(&bytes, e.line(), e.column());
        format!(
            "{}: at byte {offset}: not a diskcheck run description: {e}",
            path.display()
        )
    })
}

/// The byte offset of 1-based `line` and `column` in `bytes`.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let line_start: usize = bytes
        .split_inclusive(|&b| b == b'\n')
        .take(line.saturating_sub(1))
        .map(<[u8]>::len)
        .sum();
    line_start + column.saturating_sub(1)
}

/// A writer's connection to the listener for one stream.
#[derive(Debug)]
pub struct Link {
    out: TcpStream,
    shared: Arc<LinkShared>,
    sent: u64,
    listener: String,
}

#[derive(Debug, Default)]
struct LinkShared {
    /// Acknowledgements the listener confirmed as recorded.
    recorded: AtomicU64,
    /// Why the listener can no longer be relied on.
    gone: Mutex<Option<String>>,
}

/// How long a writer waits for the listener before it stops.
const LISTENER_PATIENCE: Duration = Duration::from_secs(15);

impl Link {
    /// Connects and announces `meta`'s stream.
    pub fn open(listener: &str, meta: &StreamMeta) -> Result<Link, String> {
        let cannot = |e: std::io::Error| format!("cannot reach the listener at {listener}: {e}");
        let out = connect(listener).map_err(cannot)?;
        out.set_nodelay(true).map_err(cannot)?;
        let mut input = BufReader::new(out.try_clone().map_err(cannot)?);
        let mut hello = format!("STREAM {} {} ", meta.run, meta.stream);
        hello.push_str(&serde_json::to_string(meta).expect("serializes"));
        hello.push('\n');
        (&out).write_all(hello.as_bytes()).map_err(cannot)?;
        out.set_read_timeout(Some(LISTENER_PATIENCE))
            .map_err(cannot)?;
        let mut reply = String::new();
        input.read_line(&mut reply).map_err(cannot)?;
        if reply.trim_end() != "OK" {
            return Err(format!(
                "the listener at {listener} refused stream {}: {}",
                meta.stream,
                reply.trim_end()
            ));
        }
        out.set_read_timeout(None).map_err(cannot)?;
        let shared = Arc::new(LinkShared::default());
        let reading = Arc::clone(&shared);
        let name = listener.to_string();
        std::thread::spawn(move || read_confirmations(input, &reading, &name));
        Ok(Link {
            out,
            shared,
            sent: 0,
            listener: listener.to_string(),
        })
    }

    /// Acknowledgements the listener has confirmed.
    pub fn recorded(&self) -> u64 {
        self.shared.recorded.load(Ordering::SeqCst)
    }

    fn gone(&self) -> Option<String> {
        self.shared.gone.lock().expect("not poisoned").clone()
    }

    fn set_gone(&self, why: String) -> String {
        self.shared
            .gone
            .lock()
            .expect("not poisoned")
            .get_or_insert(why)
            .clone()
    }

    /// Sends the acknowledgement of write `seq` (the next one). Waits while too many are
    /// unconfirmed; fails once the listener is gone.
    pub fn ack(&mut self, seq: u64) -> Result<(), String> {
        assert_eq!(seq, self.sent, "acknowledgements go out in order");
        let waiting = Instant::now();
        while self.sent - self.recorded() >= MAX_UNRECORDED {
            if let Some(why) = self.gone() {
                return Err(why);
            }
            if waiting.elapsed() > LISTENER_PATIENCE {
                return Err(self.set_gone(format!(
                    "the listener at {} confirmed nothing for {} s",
                    self.listener,
                    LISTENER_PATIENCE.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(why) = self.gone() {
            return Err(why);
        }
        if let Err(e) = (&self.out).write_all(format!("ACK {seq}\n").as_bytes()) {
            return Err(self.set_gone(format!("the listener at {} is gone: {e}", self.listener)));
        }
        self.sent += 1;
        Ok(())
    }

    /// Waits until every acknowledgement sent is confirmed (or the listener is gone), and
    /// returns how many the listener recorded.
    pub fn finish(self) -> u64 {
        let waiting = Instant::now();
        while self.recorded() < self.sent
            && self.gone().is_none()
            && waiting.elapsed() < LISTENER_PATIENCE
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.out.shutdown(std::net::Shutdown::Write);
        self.recorded()
    }
}

/// Connects to `HOST:PORT`, trying each address it resolves to.
fn connect(listener: &str) -> std::io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = None;
    for addr in listener.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, LISTENER_PATIENCE) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the name resolves to no address")))
}

/// The link's reading side: `OK <seq>` lines until the connection ends.
fn read_confirmations(mut input: BufReader<TcpStream>, shared: &LinkShared, listener: &str) {
    let mut line = String::new();
    let why = loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => break format!("the listener at {listener} closed the connection"),
            Ok(_) => {}
            Err(e) => break format!("the listener at {listener} is gone: {e}"),
        }
        let reply = line.trim_end();
        match reply
            .strip_prefix("OK ")
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(seq) => shared.recorded.store(seq + 1, Ordering::SeqCst),
            None => break format!("the listener at {listener} answered {reply:?}"),
        }
    };
    shared.gone.lock().expect("not poisoned").get_or_insert(why);
}

/// One stream's way of making write `seq` and waiting for its method's acknowledgement.
trait Writer: Send {
    fn write(&mut self, seq: u64) -> Result<(), String>;
    fn close(self: Box<Self>) -> Result<(), String>;
}

struct RawWriter {
    file: Box<dyn StorageFile>,
    block: AlignedBuf,
    run: u64,
    slots: u64,
}

impl Writer for RawWriter {
    fn write(&mut self, seq: u64) -> Result<(), String> {
        let slot = seq % self.slots;
        block::encode(
            &mut self.block,
            self.run,
            seq,
            u32::try_from(slot).expect("fewer than 2^32 slots"),
        );
        let offset = slot * self.block.len() as u64;
        // The method's own contract: `flush` is nothing for write-through methods.
        self.file
            .write_at(&self.block, offset)
            .and_then(|()| self.file.flush())
            .map_err(|e| e.to_string())
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

struct DbWriter {
    db: Db,
    run: u64,
    durability: Durability,
}

impl Writer for DbWriter {
    fn write(&mut self, seq: u64) -> Result<(), String> {
        let mut txn = self.db.begin().map_err(|e| e.to_string())?;
        txn.put(&db_key(self.run, seq), &db_value(self.run, seq))
            .and_then(|()| txn.commit_with(self.durability))
            .map_err(|e| e.to_string())
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.db.close().map_err(|e| e.to_string())
    }
}

/// Where each stream stands, for the live count.
#[derive(Debug, Clone)]
pub struct Progress {
    pub stream: String,
    /// Writes acknowledged by the method.
    pub written: u64,
    /// Acknowledgements the listener confirmed as recorded.
    pub recorded: u64,
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    pub progress: Vec<Progress>,
    /// Why it stopped early: the listener gone, a write failed.
    pub errors: Vec<String>,
}

/// A stream's name, writer and link to the listener.
type Worker = (String, Box<dyn Writer>, Link);

/// Each stream's writer and link, ready to write.
fn open_streams(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    run_file: &RunFile,
    plan: &Plan,
) -> Result<Vec<Worker>, String> {
    let run = wire::parse_run_name(&run_file.run).expect("a run we named");
    let mut workers = Vec::new();
    for meta in &run_file.streams {
        let method: FlushMethod = meta.method.parse()?;
        let path: PathBuf = dir.join(&meta.path);
        let writer: Box<dyn Writer> = match meta.mode {
            Mode::Raw => Box::new(RawWriter {
                file: storage
                    .open(&path, method)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
                block: AlignedBuf::zeroed(meta.block_bytes as usize),
                run,
                slots: meta.slots,
            }),
            Mode::Db => Box::new(DbWriter {
                db: Db::open_with_storage(
                    Arc::clone(storage),
                    &path,
                    db_options(&plan.db_options, method),
                )
                .map_err(|e| e.to_string())?,
                run,
                durability: plan.durability,
            }),
        };
        let link = Link::open(&run_file.listener, meta)?;
        workers.push((meta.stream.clone(), writer, link));
    }
    Ok(workers)
}

/// Where each stream stands, from its (written, recorded) counters.
fn snapshot(run_file: &RunFile, counts: &[(AtomicU64, AtomicU64)]) -> Vec<Progress> {
    run_file
        .streams
        .iter()
        .zip(counts)
        .map(|(meta, (written, recorded))| Progress {
            stream: meta.stream.clone(),
            written: written.load(Ordering::SeqCst),
            recorded: recorded.load(Ordering::SeqCst),
        })
        .collect()
}

/// Writes every stream of `run_file` until `stop`, calling `report` about once a second.
pub fn write_streams(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    run_file: &RunFile,
    plan: &Plan,
    stop: Stop,
    report: &mut dyn FnMut(Duration, &[Progress]),
) -> Result<Outcome, String> {
    let workers = open_streams(storage, dir, run_file, plan)?;
    let halt = AtomicBool::new(false);
    let started = Instant::now();
    let counts: Vec<(AtomicU64, AtomicU64)> = workers
        .iter()
        .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
        .collect();
    let mut errors = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .zip(&counts)
            .map(|((stream, mut writer, mut link), (written, recorded))| {
                let halt = &halt;
                scope.spawn(move || {
                    let result = (|| {
                        let mut seq = 0;
                        while !halt.load(Ordering::SeqCst)
                            && !matches!(stop, Stop::Writes(n) if seq >= n)
                        {
                            writer.write(seq).map_err(|e| format!("write {seq}: {e}"))?;
                            written.store(seq + 1, Ordering::SeqCst);
                            link.ack(seq)?;
                            recorded.store(link.recorded(), Ordering::SeqCst);
                            seq += 1;
                        }
                        Ok::<(), String>(())
                    })();
                    let result = result.and_then(|()| writer.close());
                    recorded.store(link.finish(), Ordering::SeqCst);
                    if result.is_err() {
                        halt.store(true, Ordering::SeqCst);
                    }
                    result.map_err(|e| format!("stream {stream}: {e}"))
                })
            })
            .collect();
        let mut next_report = Duration::from_secs(1);
        while !handles
            .iter()
            .all(std::thread::ScopedJoinHandle::is_finished)
        {
            std::thread::sleep(Duration::from_millis(20));
            let elapsed = started.elapsed();
            if matches!(stop, Stop::After(d) if elapsed >= d) {
                halt.store(true, Ordering::SeqCst);
            }
            if elapsed >= next_report {
                report(elapsed, &snapshot(run_file, &counts));
                next_report += Duration::from_secs(1);
            }
        }
        for handle in handles {
            if let Err(e) = handle.join().expect("a writer thread does not panic") {
                errors.push(e);
            }
        }
    });
    let progress = snapshot(run_file, &counts);
    Ok(Outcome { progress, errors })
}
