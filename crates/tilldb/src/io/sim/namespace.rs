//! The simulated directory tree: which name points at which file, live and durable (F3).
//!
//! ```text
//!   create / rename / remove ──► live names     (and queued in `pending`)
//!   flush_dir(dir)           ──► durable names  (the queued ops on entries of `dir`)
//! ```
//!
//! Directories themselves are durable as soon as `create_dir_all` returns (the engine creates
//! its directory once, before anything in it matters), and are never removed. Paths are
//! compared as given, not normalised: `a/b` and `./a/b` are different names.

use super::FileId;
use super::rng::SimRng;
use crate::io::parent_dir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most queued metadata ops; more is a runaway test that never flushes a directory.
const PENDING_OPS_MAX: usize = 1 << 16;

/// A create, rename or remove not yet made durable by `flush_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MetaOp {
    Create {
        path: PathBuf,
        id: FileId,
    },
    Rename {
        source: PathBuf,
        target: PathBuf,
        id: FileId,
    },
    Remove {
        path: PathBuf,
        id: FileId,
    },
}

impl MetaOp {
    fn id(&self) -> FileId {
        match self {
            MetaOp::Create { id, .. } | MetaOp::Rename { id, .. } | MetaOp::Remove { id, .. } => {
                *id
            }
        }
    }

    /// The names the op reads or writes.
    fn paths(&self) -> Vec<&Path> {
        match self {
            MetaOp::Create { path, .. } | MetaOp::Remove { path, .. } => vec![path],
            MetaOp::Rename { source, target, .. } => vec![source, target],
        }
    }

    /// True when the op changes an entry of directory `dir`.
    fn touches(&self, dir: &Path) -> bool {
        match self {
            MetaOp::Create { path, .. } | MetaOp::Remove { path, .. } => parent_dir(path) == dir,
            MetaOp::Rename { source, target, .. } => {
                parent_dir(source) == dir || parent_dir(target) == dir
            }
        }
    }

    /// Applies the op to `names` if it still applies there; false (and no change) if not: a
    /// create whose name is taken, a rename or remove whose name no longer names its file.
    fn apply(&self, names: &mut BTreeMap<PathBuf, FileId>) -> bool {
        match self {
            MetaOp::Create { path, id } => {
                if names.contains_key(path) {
                    return false;
                }
                names.insert(path.clone(), *id);
            }
            MetaOp::Rename { source, target, id } => {
                if names.get(source) != Some(id) {
                    return false;
                }
                names.remove(source);
                names.insert(target.clone(), *id);
            }
            MetaOp::Remove { path, id } => {
                if names.get(path) != Some(id) {
                    return false;
                }
                names.remove(path);
            }
        }
        true
    }
}

/// The name side of the disk.
#[derive(Debug, Clone)]
pub(super) struct Namespace {
    /// What `open` and `list_dir` see.
    pub(super) live: BTreeMap<PathBuf, FileId>,
    /// What a power cut keeps for sure.
    pub(super) durable: BTreeMap<PathBuf, FileId>,
    /// Existing directories (live and durable alike).
    dirs: BTreeSet<PathBuf>,
    /// Ops applied to `live` but not yet to `durable`, oldest first.
    pending: Vec<MetaOp>,
}

impl Default for Namespace {
    fn default() -> Self {
        let dirs = [PathBuf::from("/"), PathBuf::from(".")].into();
        Namespace {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            dirs,
            pending: Vec::new(),
        }
    }
}

impl Namespace {
    pub(super) fn is_dir(&self, path: &Path) -> bool {
        self.dirs.contains(path)
    }

    /// `Err(errno)` unless `path` can be created as a new file.
    pub(super) fn check_create(&self, path: &Path) -> Result<(), i32> {
        if self.live.contains_key(path) || self.is_dir(path) {
            return Err(crate::io::errno::EEXIST);
        }
        if !self.is_dir(&parent_dir(path)) {
            return Err(crate::io::errno::ENOENT);
        }
        Ok(())
    }

    /// The live file `path` names, or the errno `open` returns.
    pub(super) fn lookup(&self, path: &Path) -> Result<FileId, i32> {
        match self.live.get(path) {
            Some(id) => Ok(*id),
            None if self.is_dir(path) => Err(crate::io::errno::EISDIR),
            None => Err(crate::io::errno::ENOENT),
        }
    }

    pub(super) fn create(&mut self, path: &Path, id: FileId) {
        assert_eq!(self.check_create(path), Ok(()));
        self.queue(MetaOp::Create {
            path: path.to_path_buf(),
            id,
        });
    }

    pub(super) fn rename(&mut self, source: &Path, target: &Path) -> Result<(), i32> {
        let id = self.lookup(source)?;
        if self.is_dir(target) {
            return Err(crate::io::errno::EISDIR);
        }
        if !self.is_dir(&parent_dir(target)) {
            return Err(crate::io::errno::ENOENT);
        }
        if source != target {
            self.queue(MetaOp::Rename {
                source: source.into(),
                target: target.into(),
                id,
            });
        }
        assert_eq!(self.live.get(target), Some(&id));
        Ok(())
    }

    pub(super) fn remove(&mut self, path: &Path) -> Result<(), i32> {
        let id = self.lookup(path)?;
        self.queue(MetaOp::Remove {
            path: path.to_path_buf(),
            id,
        });
        assert!(!self.live.contains_key(path));
        Ok(())
    }

    fn queue(&mut self, op: MetaOp) {
        assert!(
            self.pending.len() < PENDING_OPS_MAX,
            "more than {PENDING_OPS_MAX} ops queued"
        );
        let applied = op.apply(&mut self.live);
        assert!(applied, "caller checked that {op:?} applies");
        self.pending.push(op);
    }

    pub(super) fn create_dir_all(&mut self, path: &Path) -> Result<(), i32> {
        if self.live.contains_key(path) {
            return Err(crate::io::errno::EEXIST);
        }
        let ancestors: Vec<&Path> = path
            .ancestors()
            .filter(|dir| !dir.as_os_str().is_empty())
            .collect();
        if ancestors
            .iter()
            .skip(1)
            .any(|dir| self.live.contains_key(*dir))
        {
            return Err(crate::io::errno::ENOTDIR);
        }
        self.dirs
            .extend(ancestors.iter().map(|dir| dir.to_path_buf()));
        assert!(self.is_dir(path));
        Ok(())
    }

    /// The sorted names of the files and directories directly in `dir`.
    pub(super) fn list_dir(&self, dir: &Path) -> Result<Vec<String>, i32> {
        if !self.is_dir(dir) {
            return Err(if self.live.contains_key(dir) {
                crate::io::errno::ENOTDIR
            } else {
                crate::io::errno::ENOENT
            });
        }
        let files = self.live.keys().map(PathBuf::as_path);
        let dirs = self.dirs.iter().map(PathBuf::as_path).filter(|d| *d != dir);
        let names: BTreeSet<String> = files
            .chain(dirs)
            .filter(|path| parent_dir(path) == dir)
            .filter_map(|path| path.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        Ok(names.into_iter().collect())
    }

    /// Makes the queued ops on entries of `dir` durable, with every earlier queued op on the
    /// same files or names: a journal commits metadata in order, so a rename into `dir` brings
    /// the create of its file in another directory with it. A cross-directory rename is made
    /// durable whole by flushing either directory (ext4 and XFS journal it as one transaction).
    ///
    /// Why this keeps `durable` + `pending` replaying to `live`: an op left queued shares no
    /// file and no name with any later op made durable, so the two commute.
    pub(super) fn flush_dir(&mut self, dir: &Path) -> Result<(), i32> {
        if !self.is_dir(dir) {
            return Err(crate::io::errno::ENOENT);
        }
        // Scan backwards so each selected op pulls in the earlier ops it depends on.
        let mut needed_ids = BTreeSet::new();
        let mut needed_paths: BTreeSet<PathBuf> = BTreeSet::new();
        let mut selected = vec![false; self.pending.len()];
        for (index, op) in self.pending.iter().enumerate().rev() {
            let depends = needed_ids.contains(&op.id())
                || op.paths().iter().any(|path| needed_paths.contains(*path));
            if op.touches(dir) || depends {
                selected[index] = true;
                needed_ids.insert(op.id());
                needed_paths.extend(op.paths().into_iter().map(Path::to_path_buf));
            }
        }
        let mut kept = Vec::with_capacity(self.pending.len());
        for (op, durable_now) in self.pending.drain(..).zip(selected) {
            if durable_now {
                let applied = op.apply(&mut self.durable);
                assert!(applied, "{op:?} made durable out of order");
            } else {
                kept.push(op);
            }
        }
        self.pending = kept;
        assert!(
            self.pending.iter().all(|op| !op.touches(dir)),
            "an op on {} stayed queued",
            dir.display()
        );
        Ok(())
    }

    /// After a process kill: every queued op survives (the kernel has them).
    pub(super) fn settle_process_kill(&mut self) {
        self.pending.clear();
        self.durable.clone_from(&self.live);
    }

    /// After a power cut: each queued op, in order, is kept or lost (F3).
    pub(super) fn settle_power_loss(&mut self, rng: &mut SimRng) {
        for op in self.pending.drain(..) {
            if rng.coin() {
                op.apply(&mut self.durable);
            }
        }
        self.live.clone_from(&self.durable);
    }

    /// Every file some name, live or durable, or some queued op refers to.
    pub(super) fn referenced(&self) -> BTreeSet<FileId> {
        let names = self.live.values().chain(self.durable.values()).copied();
        names.chain(self.pending.iter().map(MetaOp::id)).collect()
    }

    pub(super) fn check_invariants(&self) {
        assert!(self.pending.len() <= PENDING_OPS_MAX);
        assert!(self.is_dir(Path::new("/")));
        assert!(self.is_dir(Path::new(".")));
        for path in self.live.keys().chain(self.durable.keys()) {
            assert!(
                !self.is_dir(path),
                "{} is both a file and a directory",
                path.display()
            );
        }
        for path in self.live.keys() {
            assert!(
                self.is_dir(&parent_dir(path)),
                "{} lives in a missing directory",
                path.display()
            );
        }
        for dir in &self.dirs {
            assert!(
                self.is_dir(&parent_dir(dir)),
                "directory {} has no parent",
                dir.display()
            );
        }
        if self.pending.is_empty() {
            assert!(
                self.live == self.durable,
                "nothing queued, yet live names != durable"
            );
        } else if cfg!(debug_assertions) {
            let mut replayed = self.durable.clone();
            for op in &self.pending {
                assert!(op.apply(&mut replayed), "queued {op:?} no longer applies");
            }
            assert!(
                replayed == self.live,
                "queued ops replayed onto durable names != live"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn namespace_with_dirs() -> Namespace {
        let mut names = Namespace::default();
        names.create_dir_all(&p("/d")).expect("mkdir /d");
        names.create_dir_all(&p("/e")).expect("mkdir /e");
        names
    }

    #[test]
    fn flush_dir_makes_only_its_entries_durable() {
        let mut names = namespace_with_dirs();
        names.create(&p("/d/a"), FileId(1));
        names.create(&p("/e/b"), FileId(2));
        names.flush_dir(&p("/d")).expect("flush /d");
        assert_eq!(names.durable.keys().collect::<Vec<_>>(), [&p("/d/a")]);
        assert_eq!(names.pending.len(), 1);
        names.flush_dir(&p("/e")).expect("flush /e");
        assert_eq!(names.durable, names.live);
        names.check_invariants();
    }

    #[test]
    fn rename_into_flushed_dir_pulls_in_its_create() {
        let mut names = namespace_with_dirs();
        names.create(&p("/d/tmp"), FileId(1));
        names.rename(&p("/d/tmp"), &p("/e/final")).expect("rename");
        names.flush_dir(&p("/e")).expect("flush /e");
        assert_eq!(names.durable.get(&p("/e/final")), Some(&FileId(1)));
        assert!(names.pending.is_empty());
        names.check_invariants();
    }

    #[test]
    fn flush_dir_keeps_an_earlier_rename_off_a_replaced_name() {
        // /d/a moves aside, then /e/c takes its name. Flushing /e alone must not make the
        // second rename durable without the first, or file 1 would lose its last name.
        let mut names = namespace_with_dirs();
        names.create(&p("/d/a"), FileId(1));
        names.create(&p("/e/c"), FileId(2));
        names.flush_dir(&p("/d")).expect("flush /d");
        names.flush_dir(&p("/e")).expect("flush /e");
        names
            .rename(&p("/d/a"), &p("/d/b"))
            .expect("rename a aside");
        names
            .rename(&p("/e/c"), &p("/d/a"))
            .expect("rename c onto a");
        names.flush_dir(&p("/e")).expect("flush /e");
        assert_eq!(names.durable.get(&p("/d/b")), Some(&FileId(1)));
        assert_eq!(names.durable.get(&p("/d/a")), Some(&FileId(2)));
        names.check_invariants();
    }

    #[test]
    fn errnos_match_the_file_system() {
        let mut names = namespace_with_dirs();
        names.create(&p("/d/a"), FileId(1));
        assert_eq!(
            names.check_create(&p("/d/a")),
            Err(crate::io::errno::EEXIST)
        );
        assert_eq!(names.check_create(&p("/d")), Err(crate::io::errno::EEXIST));
        assert_eq!(
            names.check_create(&p("/x/a")),
            Err(crate::io::errno::ENOENT)
        );
        assert_eq!(names.lookup(&p("/d")), Err(crate::io::errno::EISDIR));
        assert_eq!(names.remove(&p("/d/b")), Err(crate::io::errno::ENOENT));
        assert_eq!(
            names.rename(&p("/d/a"), &p("/e")),
            Err(crate::io::errno::EISDIR)
        );
        assert_eq!(
            names.create_dir_all(&p("/d/a/sub")),
            Err(crate::io::errno::ENOTDIR)
        );
        assert_eq!(names.list_dir(&p("/d/a")), Err(crate::io::errno::ENOTDIR));
        assert_eq!(
            names.list_dir(&p("/")),
            Ok(vec!["d".to_owned(), "e".to_owned()])
        );
        assert_eq!(names.list_dir(&p("/d")), Ok(vec!["a".to_owned()]));
    }
}
