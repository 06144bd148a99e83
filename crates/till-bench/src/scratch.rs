//! [`ScratchDir`]: a fresh directory for one benchmark run, removed when the run ends (also on
//! error or panic), together with the parent when the run created it.

use std::io;
use std::path::{Path, PathBuf};

/// Attempts at a fresh name before giving up (another run may race for the same names).
const NAME_ATTEMPTS_MAX: u32 = 1000;

/// A fresh subdirectory of a benchmark directory, removed on drop.
#[derive(Debug)]
pub struct ScratchDir {
    /// The fresh run directory.
    path: PathBuf,
    /// The parent, when this run created it (removed too if it is then empty).
    created_parent: Option<PathBuf>,
}

impl ScratchDir {
    /// Creates `parent` if missing, then a new subdirectory `PREFIX-PID-N` in it.
    /// [`ScratchDir::create`] for a benchmark run, its error saying where.
    pub fn for_run(parent: &Path, prefix: &str) -> Result<ScratchDir, String> {
        ScratchDir::create(parent, prefix)
            .map_err(|e| format!("cannot create a run directory in {}: {e}", parent.display()))
    }

    pub fn create(parent: &Path, prefix: &str) -> io::Result<ScratchDir> {
        let existed = parent.try_exists()?;
        std::fs::create_dir_all(parent)?;
        let parent = std::fs::canonicalize(parent)?;
        let created_parent = (!existed).then(|| parent.clone());
        for n in 0..NAME_ATTEMPTS_MAX {
            let path = parent.join(format!("{prefix}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(ScratchDir {
                        path,
                        created_parent,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "no free scratch directory name in {}",
            parent.display()
        )))
    }

    /// The run directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Best effort: a benchmark must not fail, or hide its real error, over cleanup.
        let _ = std::fs::remove_dir_all(&self.path);
        if let Some(parent) = &self.created_parent {
            let _ = std::fs::remove_dir(parent); // only succeeds when empty
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_itself_and_a_parent_it_created() {
        let base = tempfile::tempdir().expect("tempdir");
        let parent = base.path().join("bench");
        let scratch = ScratchDir::create(&parent, "log").expect("create");
        std::fs::write(scratch.path().join("f"), b"x").expect("write");
        let second = ScratchDir::create(&parent, "log").expect("create");
        assert_ne!(scratch.path(), second.path());
        drop(second);
        assert!(parent.exists(), "parent removed while a run still uses it");
        drop(scratch);
        assert!(!parent.exists(), "created parent left behind");
    }

    #[test]
    fn keeps_a_parent_that_existed() {
        let base = tempfile::tempdir().expect("tempdir");
        drop(ScratchDir::create(base.path(), "log").expect("create"));
        assert!(base.path().exists());
        assert!(std::fs::read_dir(base.path()).expect("ls").next().is_none());
    }
}
