//! [`SimDisk`]: a deterministic, fault-injecting disk in memory, for tests (TESTPLAN F1-F7).
//!
//! # The model
//!
//! Each file has a *live* image (what reads see) and a *durable* image (what a power cut keeps
//! for sure), with the ordered list of unflushed ops between them. The directory tree has a
//! live and a durable name map, with the ordered list of metadata ops between them.
//!
//! ```text
//!                 write_at, set_len                         flush()
//!   caller ─────────────────────────► live image ─────────────────────────► durable image
//!                                     └ unflushed: [write, write, set_len, write] ┘
//!   method:  Fsync, Fdatasync, Direct   flush() makes every unflushed op durable
//!            Dsync, DirectDsync         each write is durable on return (with the ops before
//!                                       it); flush() makes a set_len durable
//!            NoSync                     flush() does nothing
//!
//!                 create, rename, remove                    flush_dir(dir)
//!   caller ─────────────────────────► live names ─────────────────────────► durable names
//!                                     └ pending: [create a, rename a→b, remove c] ┘
//! ```
//!
//! [`SimDisk::crash`] computes the post-crash image, which becomes both live and durable:
//!
//! | mode | file bytes | names |
//! |---|---|---|
//! | [`CrashMode::ProcessKill`] (F1) | live: everything written | live: everything done |
//! | [`CrashMode::PowerLoss`] (F2, F3) | durable, plus each unflushed write kept, dropped or torn per `tear_bytes` chunk (old, new or garbage), each unflushed `set_len` kept or dropped | durable, plus each pending op kept or lost |
//!
//! A file whose name never reached the durable names may vanish whole on a power cut. A crash
//! also bumps the disk's epoch: handles opened before it fail every call.
//!
//! Faults ([`Fault`], [`FaultKind`]) fail the nth call of a kind, once or from then on: `EIO`,
//! `ENOSPC`, a short write, an fsync that loses data (F4), or the disk dying mid-call, after
//! which everything fails until [`SimDisk::crash`]. [`SimDisk::set_lying_flushes`] makes
//! every flush return `Ok` without making anything durable (F6), [`SimDisk::corrupt`] flips
//! bits.
//!
//! Every random choice comes from one generator seeded by [`SimConfig::seed`], and every map
//! is ordered, so one seed and one sequence of calls give byte-identical images.
//!
//! Limits: files of up to 4 GiB (`EFBIG` beyond); directories are durable at once and never
//! removed; a file is freed only at a crash, when no name refers to it. `exists`, `len` and
//! `device_facts` are not counted and cannot be faulted, but fail on a dead disk.

mod crash;
mod fault;
mod file;
mod image;
mod lock;
mod namespace;
mod record;
mod rng;
mod storage;

pub use crash::CrashMode;
pub use fault::{Fault, FaultKind, IoKind};
pub use record::CrashPoint;

use self::fault::{FaultTable, SimFailure, fault_error, sim_error};
use self::image::FileData;
use self::namespace::Namespace;
use self::rng::SimRng;
use crate::FlushMethod;
use crate::error::{Error, IoOp, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Largest simulated file, 4 GiB: the images live in memory.
const FILE_BYTES_MAX: u64 = 1 << 32;

/// The simulated device's geometry and behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Seeds every random choice the disk makes.
    pub seed: u64,
    /// Smallest unit the device addresses; short writes are cut on this boundary. Default 512.
    pub logical_block_bytes: u32,
    /// Smallest unit the device writes without read-modify-write. Default 4096.
    pub physical_block_bytes: u32,
    /// Alignment of direct-I/O buffers, lengths and offsets. Default 512.
    pub dio_align: u32,
    /// Whether direct flush methods may be used (else they fail as on tmpfs). Default true.
    pub direct_io: bool,
    /// `(min, max)` bytes the device writes atomically, never torn; `None` (the default) when
    /// it promises nothing.
    pub atomic_write_unit: Option<(u32, u32)>,
    /// How long every flush and write-through write takes. Default zero.
    pub flush_latency: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            logical_block_bytes: 512,
            physical_block_bytes: 4096,
            dio_align: 512,
            direct_io: true,
            atomic_write_unit: None,
            flush_latency: Duration::ZERO,
        }
    }
}

impl SimConfig {
    /// A 4K-native device: 4096-byte logical and physical blocks and direct-I/O alignment.
    #[must_use]
    pub fn four_k_native() -> Self {
        SimConfig {
            logical_block_bytes: 4096,
            physical_block_bytes: 4096,
            dio_align: 4096,
            ..SimConfig::default()
        }
    }

    /// Panics unless the geometry is one a device could have.
    fn validate(&self) {
        let (logical, physical) = (self.logical_block_bytes, self.physical_block_bytes);
        assert!(
            logical.is_power_of_two(),
            "logical block {logical} not a power of two"
        );
        assert!(
            physical.is_power_of_two(),
            "physical block {physical} not a power of two"
        );
        assert!(logical >= 512, "logical block {logical} below 512");
        assert!(
            logical <= physical,
            "logical block {logical} above physical {physical}"
        );
        let align = self.dio_align;
        assert!(
            align.is_power_of_two(),
            "dio_align {align} not a power of two"
        );
        assert!(
            align as usize <= super::AlignedBuf::ALIGN,
            "AlignedBuf cannot meet {align}"
        );
        if let Some((min, max)) = self.atomic_write_unit {
            assert!(
                min.is_power_of_two(),
                "atomic unit min {min} not a power of two"
            );
            assert!(
                max.is_power_of_two(),
                "atomic unit max {max} not a power of two"
            );
            assert!(min <= max, "atomic unit min {min} above max {max}");
        }
    }
}

/// A simulated disk. Clones share one disk.
///
/// Each clone is one process's view of it: a clone made before a crash belongs to a process
/// the crash killed, so its directory calls fail as stale from then on, like its open files
/// (a test that leaks a database handle over a crash cannot have that handle's threads
/// rename or remove files under the next open). The handle [`SimDisk::new`] returns is the
/// test harness, which lives through every crash, and so does a handle that calls
/// [`SimDisk::crash`]: it goes on in the new epoch.
pub struct SimDisk {
    state: Arc<Mutex<State>>,
    /// The epoch this view's process started in, or [`HARNESS`].
    process: AtomicU64,
}

/// The `process` of the harness handle: never stale.
const HARNESS: u64 = u64::MAX;

impl Clone for SimDisk {
    fn clone(&self) -> Self {
        let epoch = self.state.lock().epoch;
        SimDisk {
            state: Arc::clone(&self.state),
            process: AtomicU64::new(epoch),
        }
    }
}

/// Identifies a file (an inode) independently of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct FileId(u64);

/// Everything on the disk. Guarded by `SimDisk::state`.
#[derive(Clone)]
struct State {
    config: SimConfig,
    rng: SimRng,
    /// Bumped by every crash; handles carry the epoch they were opened in.
    epoch: u64,
    /// A [`FaultKind::Crash`] fired: every call fails until the next crash.
    dead: bool,
    lying_flushes: bool,
    faults: FaultTable,
    names: Namespace,
    files: BTreeMap<FileId, FileData>,
    next_file_id: u64,
    /// Crash points not yet taken, while recording (`record.rs`).
    recorded: Option<Vec<record::CrashPoint>>,
    /// Crash points taken so far since recording started.
    recorded_taken: usize,
    /// Locks held through `Storage::lock`; emptied by a crash.
    locks: lock::LockTable,
}

impl State {
    /// Fails the call if the disk is dead or the handle (`epoch`, if any) predates a crash.
    fn check_alive(&self, op: IoOp, path: &Path, epoch: Option<u64>) -> Result<()> {
        if self.dead {
            return Err(sim_error(op, path, SimFailure::Dead));
        }
        if epoch.is_some_and(|epoch| epoch != self.epoch) {
            assert!(epoch < Some(self.epoch), "handle from the future");
            return Err(sim_error(op, path, SimFailure::StaleHandle));
        }
        Ok(())
    }

    /// Every counted call starts here: count it, refuse it if the disk is dead or the handle
    /// stale, then return the fault it must suffer, if any. A `Crash` fault kills the disk.
    fn admit(
        &mut self,
        kind: IoKind,
        paths: &[&Path],
        epoch: Option<u64>,
    ) -> Result<Option<FaultKind>> {
        assert_ne!(kind, IoKind::Write, "writes are admitted by admit_write");
        self.admit_call(kind, paths, epoch, None)
    }

    /// [`State::admit`] for a write of `bytes` at `offset` of `file`, `atomic` if the device
    /// promised to do it whole.
    fn admit_write(
        &mut self,
        path: &Path,
        epoch: Option<u64>,
        write: (FileId, u64, &[u8], bool),
    ) -> Result<Option<FaultKind>> {
        self.admit_call(IoKind::Write, &[path], epoch, Some(write))
    }

    fn admit_call(
        &mut self,
        kind: IoKind,
        paths: &[&Path],
        epoch: Option<u64>,
        write: Option<(FileId, u64, &[u8], bool)>,
    ) -> Result<Option<FaultKind>> {
        assert!(!paths.is_empty(), "every call names a path");
        self.faults.count_call(kind);
        self.check_alive(kind.op(), paths[0], epoch)?;
        if kind.changes_disk() {
            self.record_point(kind, paths[0], write);
        }
        let fault = self.faults.next_fault(kind, paths);
        if fault == Some(FaultKind::Crash) {
            self.dead = true;
        }
        Ok(fault)
    }

    /// [`State::admit`] for calls a fault simply fails, with nothing landing.
    fn admit_plain(&mut self, kind: IoKind, paths: &[&Path], epoch: Option<u64>) -> Result<()> {
        match self.admit(kind, paths, epoch)? {
            Some(fault) => Err(fault_error(fault, kind.op(), paths[0])),
            None => Ok(()),
        }
    }

    fn file(&self, id: FileId) -> &FileData {
        self.files
            .get(&id)
            .expect("files are freed only at a crash, which makes handles stale")
    }

    fn file_mut(&mut self, id: FileId) -> &mut FileData {
        self.files
            .get_mut(&id)
            .expect("files are freed only at a crash, which makes handles stale")
    }

    /// The live file `path` names.
    fn lookup(&self, path: &Path) -> Option<&FileData> {
        self.names.live.get(path).map(|id| self.file(*id))
    }

    /// The error for a direct flush method on a device without direct I/O, as `FileStorage`
    /// reports an `EINVAL` from `open(O_DIRECT)`.
    fn check_method(&self, path: &Path, method: FlushMethod) -> Result<()> {
        if method == FlushMethod::BarrierFsync {
            // Not modelled: a barrier's power cut is an earlier moment's power cut with an
            // honest device (docs/durability.md), which the explorers cover; the simulated
            // disk does not pretend to test the barrier itself.
            return Err(Error::InvalidOptions(format!(
                "{}: flush method {method} is not simulated (it exists on macOS only)",
                path.display()
            )));
        }
        if method.is_direct() && !self.config.direct_io {
            return Err(Error::InvalidOptions(format!(
                "{}: the file system refuses O_DIRECT, so flush method {method} cannot be used \
                 here; choose fdatasync or dsync",
                path.display()
            )));
        }
        Ok(())
    }

    fn check_invariants(&self) {
        self.config.validate();
        self.faults.check_invariants();
        self.names.check_invariants();
        self.locks.check_invariants();
        let referenced = self.names.referenced();
        for id in &referenced {
            assert!(
                self.files.contains_key(id),
                "a name or queued op refers to missing {id:?}"
            );
        }
        for (id, file) in &self.files {
            assert!(id.0 < self.next_file_id, "{id:?} was never handed out");
            file.check_invariants();
        }
    }
}

impl SimDisk {
    /// An empty disk: only the directories `/` and `.` exist.
    #[must_use]
    pub fn new(config: SimConfig) -> Self {
        config.validate();
        let state = State {
            rng: SimRng::new(config.seed),
            config,
            epoch: 0,
            dead: false,
            lying_flushes: false,
            faults: FaultTable::default(),
            names: Namespace::default(),
            files: BTreeMap::new(),
            next_file_id: 0,
            recorded: None,
            recorded_taken: 0,
            locks: lock::LockTable::default(),
        };
        state.check_invariants();
        SimDisk {
            state: Arc::new(Mutex::new(state)),
            process: AtomicU64::new(HARNESS),
        }
    }

    /// The epoch directory calls of this view carry: `None` for the harness.
    fn process_epoch(&self) -> Option<u64> {
        let epoch = self.process.load(Ordering::Acquire);
        (epoch != HARNESS).then_some(epoch)
    }

    /// Adds a fault rule. Its `nth` counts calls from now on.
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.inject(fault);
    }

    /// Removes every fault rule. A disk killed by a `Crash` fault stays dead until
    /// [`SimDisk::crash`].
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Crashes the machine: every file and name becomes what `mode` leaves of it, both live and
    /// durable, and every handle opened before now fails from now on. Revives a dead disk.
    /// Fault rules stay.
    pub fn crash(&self, mode: CrashMode) {
        let mut state = self.state.lock();
        state.crash(mode);
        if self.process.load(Ordering::Acquire) != HARNESS {
            self.process.store(state.epoch, Ordering::Release);
        }
    }

    /// A new, independent disk holding a copy of this one's state (files, names, unflushed
    /// ops, fault rules, a dead disk stays dead), whose random choices come from `seed`. The
    /// returned handle is a harness handle; handles of this disk do not reach the copy. An
    /// explorer runs a workload to a crash point once and forks there, one fork per way of
    /// crashing.
    #[must_use]
    pub fn fork(&self, seed: u64) -> SimDisk {
        let mut state = {
            let mut state = self.state.lock();
            let recorded = state.recorded.take();
            let copy = state.clone();
            state.recorded = recorded;
            copy
        };
        state.rng = SimRng::new(seed);
        state.recorded_taken = 0;
        state.locks.clear();
        state.check_invariants();
        SimDisk {
            state: Arc::new(Mutex::new(state)),
            process: AtomicU64::new(HARNESS),
        }
    }

    /// Fault rules still to fire: one-shot rules whose call has not come yet, and persistent
    /// rules. A test that injected one fault learns from this whether it fired.
    #[must_use]
    pub fn faults_pending(&self) -> usize {
        self.state.lock().faults.pending()
    }

    /// How many calls of `kind` the disk has seen, failed ones included.
    #[must_use]
    pub fn call_count(&self, kind: IoKind) -> u64 {
        self.state.lock().faults.call_count(kind)
    }

    /// F6: while `lie` holds, flushes, directory flushes and write-through writes return as
    /// usual but make nothing durable. Ops made in the meantime become durable at the first
    /// honest flush after.
    pub fn set_lying_flushes(&self, lie: bool) {
        self.state.lock().lying_flushes = lie;
    }

    /// Flips the bits of `xor_mask` in the byte at `offset` of the live file `path`, in both its
    /// live and durable images (whichever reach that far). Panics if neither does.
    pub fn corrupt(&self, path: &Path, offset: u64, xor_mask: u8) {
        let mut state = self.state.lock();
        let id = *state
            .names
            .live
            .get(path)
            .unwrap_or_else(|| panic!("corrupt: no file {}", path.display()));
        let hit = state.file_mut(id).corrupt(offset, xor_mask);
        assert!(
            hit,
            "corrupt: offset {offset} is past the end of {}",
            path.display()
        );
    }

    /// What reads of `path` see now, or `None` if no such file.
    #[must_use]
    pub fn live_contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.state.lock().lookup(path).map(|file| file.live.clone())
    }

    /// What a power cut right now would at best keep of `path` for flushed data: its durable
    /// image under its durable name, or `None` if the name is not durable.
    #[must_use]
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        state
            .names
            .durable
            .get(path)
            .map(|id| state.file(*id).durable.clone())
    }

    /// Panics if the disk's state is inconsistent. Cheap checks always; replaying every queue
    /// in debug builds.
    pub fn check_invariants(&self) {
        self.state.lock().check_invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_validate() {
        SimConfig::default().validate();
        SimConfig::four_k_native().validate();
        let config = SimConfig {
            atomic_write_unit: Some((4096, 65536)),
            ..SimConfig::default()
        };
        config.validate();
    }

    #[test]
    #[should_panic(expected = "above physical")]
    fn logical_above_physical_is_refused() {
        let config = SimConfig {
            logical_block_bytes: 8192,
            ..SimConfig::default()
        };
        let _ = SimDisk::new(config);
    }

    #[test]
    fn debug_does_not_deadlock_under_the_lock() {
        let disk = SimDisk::new(SimConfig::default());
        let _guard = disk.state.lock();
        assert!(format!("{disk:?}").starts_with("SimDisk"));
    }
}
