//! `till diskcheck listen`: the machine that keeps its power. It records every
//! acknowledgement a writer sends, durably, before confirming it (the protocol and the record
//! format are in `wire.rs`), and hands a run's records to `verify`.

use super::wire::{self, StreamMeta};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tilldb::FlushMethod;
use tilldb::io::{FileStorage, Storage, StorageFile};

/// A listener accepting connections on its own thread.
#[derive(Debug)]
pub struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Binds `bind` and records into `dir` (created when missing).
    pub fn start(bind: &str, dir: &Path) -> Result<Listener, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the record directory {}: {e}", dir.display()))?;
        let socket =
            TcpListener::bind(bind).map_err(|e| format!("cannot listen on {bind}: {e}"))?;
        let addr = socket.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let dir = dir.to_path_buf();
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for conn in socket.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let peer = conn
                        .peer_addr()
                        .map_or_else(|_| "?".to_string(), |a| a.to_string());
                    if let Err(e) = serve(conn, &dir) {
                        eprintln!("till diskcheck listen: {peer}: {e}");
                    }
                });
            }
        });
        Ok(Listener {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the system chose for `--port 0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Listener {
    /// Stops accepting (connections already open finish on their own threads).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let _ = TcpStream::connect(wake);
            let _ = thread.join();
        }
    }
}

/// The longest request line accepted (a `STREAM` line with its description is far shorter).
const MAX_LINE: u64 = 64 * 1024;

/// One connection: a writer's stream, or a `FETCH`/`RUNS` from verify.
fn serve(conn: TcpStream, dir: &Path) -> Result<(), String> {
    conn.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut out = conn.try_clone().map_err(|e| e.to_string())?;
    let mut input = BufReader::new(conn);
    let mut line = String::new();
    let mut stream: Option<OpenRecord> = None;
    loop {
        match input.by_ref().take(MAX_LINE).read_line(&mut line) {
            Ok(0) => break,
            Ok(_) if line.ends_with('\n') => {}
            Ok(_) if line.len() as u64 >= MAX_LINE => {
                return Err(format!("a request longer than {MAX_LINE} bytes"));
            }
            // The connection ended in the middle of a line.
            Ok(_) => break,
            // Quiet for a batch window (a partial line stays in `line`): record what waits.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Some(record) = stream.as_mut() {
                    record.confirm(&mut out)?;
                }
                continue;
            }
            Err(e) => return Err(e.to_string()),
        }
        let request = line.trim_end_matches(['\n', '\r']);
        let (verb, rest) = request.split_once(' ').unwrap_or((request, ""));
        let reply = match (verb, stream.as_mut()) {
            ("ACK", Some(record)) => {
                record.receive(rest).inspect_err(|why| {
                    let _ = writeln!(out, "ERR {why}");
                })?;
                None
            }
            ("STREAM", None) => Some(match OpenRecord::create(dir, rest) {
                Ok(record) => {
                    println!(
                        "run {} stream {}: recording",
                        record.meta.run, record.meta.stream
                    );
                    stream = Some(record);
                    // From now on a quiet connection still gets its batch recorded.
                    input
                        .get_ref()
                        .set_read_timeout(Some(wire::BATCH_WINDOW))
                        .map_err(|e| e.to_string())?;
                    b"OK\n".to_vec()
                }
                Err(why) => format!("ERR {why}\n").into_bytes(),
            }),
            ("FETCH", None) => Some(fetch(dir, rest)),
            ("RUNS", None) => Some(format!("RUNS {}\n", runs(dir).join(" ")).into_bytes()),
            _ => Some(format!("ERR unexpected request {request:?}\n").into_bytes()),
        };
        line.clear();
        if let Some(reply) = reply {
            out.write_all(&reply)
                .map_err(|e| format!("cannot answer: {e}"))?;
        }
        if let Some(record) = stream.as_mut().filter(|r| r.due()) {
            record.confirm(&mut out)?;
        }
    }
    if let Some(mut record) = stream {
        let confirmed = record.confirm(&mut out);
        println!(
            "run {} stream {}: {} acknowledgements recorded; connection closed",
            record.meta.run, record.meta.stream, record.recorded
        );
        confirmed?;
    }
    Ok(())
}

/// A stream's record file, open for appending.
struct OpenRecord {
    meta: StreamMeta,
    file: Box<dyn StorageFile>,
    len: u64,
    /// Acknowledgements `0..recorded` are durable in the file.
    recorded: u64,
    /// Acknowledgements `recorded..next` wait for the next batch.
    next: u64,
    /// When the oldest waiting acknowledgement arrived.
    waiting_since: Option<Instant>,
}

impl OpenRecord {
    /// Creates the record of `STREAM <run> <stream> <meta>`, durable (name included) on return.
    fn create(dir: &Path, args: &str) -> Result<OpenRecord, String> {
        let mut parts = args.splitn(3, ' ');
        let (Some(run), Some(name), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("expected STREAM <run> <stream> <meta>".into());
        };
        if !wire::valid_name(run) || !wire::valid_name(name) {
            return Err(format!("invalid run or stream name {run:?} {name:?}"));
        }
        let meta: StreamMeta = serde_json::from_str(json).map_err(|e| e.to_string())?;
        if meta.run != run || meta.stream != name {
            return Err("the stream's description names another run or stream".into());
        }
        let storage = FileStorage::new();
        let run_dir = dir.join(run);
        let path = run_dir.join(format!("{name}.acks"));
        let io = |e: tilldb::Error| e.to_string();
        storage.create_dir_all(&run_dir).map_err(io)?;
        storage.flush_dir(dir).map_err(io)?;
        let file = storage.create(&path, FlushMethod::Fdatasync).map_err(|e| {
            format!("stream {name} of run {run} exists already or cannot be created: {e}")
        })?;
        let header = wire::record_header(&meta);
        file.write_at(header.as_bytes(), 0).map_err(io)?;
        file.flush().map_err(io)?;
        storage.flush_dir(&run_dir).map_err(io)?;
        Ok(OpenRecord {
            meta,
            file,
            len: header.len() as u64,
            recorded: 0,
            next: 0,
            waiting_since: None,
        })
    }

    /// Takes `ACK <seq>`'s argument: the next acknowledgement, or an error.
    fn receive(&mut self, arg: &str) -> Result<(), String> {
        let seq: u64 = arg
            .parse()
            .map_err(|_| format!("bad acknowledgement {arg:?}"))?;
        if seq != self.next {
            return Err(format!(
                "acknowledgement {seq} out of order: {} was next",
                self.next
            ));
        }
        self.next += 1;
        self.waiting_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// True once acknowledgements have waited a batch window.
    fn due(&self) -> bool {
        self.waiting_since
            .is_some_and(|t| t.elapsed() >= wire::BATCH_WINDOW)
    }

    /// Records the waiting acknowledgements as one batch, durably, then confirms them.
    fn confirm(&mut self, out: &mut TcpStream) -> Result<(), String> {
        if self.next == self.recorded {
            return Ok(());
        }
        let mut line = String::new();
        wire::record_line(&mut line, self.recorded, self.next - 1, wire::unix_ms());
        self.append(&line)?;
        self.recorded = self.next;
        self.waiting_since = None;
        writeln!(out, "OK {}", self.next - 1).map_err(|e| format!("cannot answer: {e}"))
    }

    /// Appends `lines` and makes them durable.
    fn append(&mut self, lines: &str) -> Result<(), String> {
        self.file
            .write_at(lines.as_bytes(), self.len)
            .and_then(|()| self.file.flush())
            .map_err(|e| format!("cannot record acknowledgements: {e}"))?;
        self.len += lines.len() as u64;
        Ok(())
    }
}

/// The runs recorded in `dir`, sorted.
fn runs(dir: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| wire::parse_run_name(name).is_some())
        .collect();
    runs.sort();
    runs
}

/// The answer to `FETCH <run>`: each record's bytes as they are on disk.
fn fetch(dir: &Path, run: &str) -> Vec<u8> {
    if !wire::valid_name(run) || !dir.join(run).is_dir() {
        let held = runs(dir);
        return format!(
            "ERR this listener holds no run {run:?}; it holds {}\n",
            if held.is_empty() {
                "none".to_string()
            } else {
                held.join(", ")
            }
        )
        .into_bytes();
    }
    let run_dir: PathBuf = dir.join(run);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&run_dir) {
        Ok(entries) => entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "acks"))
            .collect(),
        Err(e) => return format!("ERR cannot list {}: {e}\n", run_dir.display()).into_bytes(),
    };
    files.sort();
    let mut reply = format!("RUN {run} {}\n", files.len()).into_bytes();
    for path in files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        match std::fs::read(&path) {
            Ok(bytes) => {
                reply.extend_from_slice(format!("STREAM {name} {}\n", bytes.len()).as_bytes());
                reply.extend_from_slice(&bytes);
            }
            Err(e) => return format!("ERR cannot read {}: {e}\n", path.display()).into_bytes(),
        }
    }
    reply.extend_from_slice(b"END\n");
    reply
}
