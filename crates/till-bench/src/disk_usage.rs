//! [`DiskUsage`]: the space a database directory takes, as `du` counts it (`till bench store`).

use std::path::{Path, PathBuf};

/// Directory levels `DiskUsage::of` descends (a database has two).
const DEPTH_MAX: usize = 8;

/// Space the database directory takes, after close.
#[derive(Debug, Clone)]
pub struct DiskUsage {
    /// Blocks allocated, as `du` counts them.
    pub allocated_bytes: u64,
    /// File lengths.
    pub apparent_bytes: u64,
    /// Allocated bytes per entry of the directory, by name.
    pub parts: Vec<(String, u64)>,
}

impl DiskUsage {
    pub fn of(dir: &Path) -> Result<DiskUsage, String> {
        let mut usage = DiskUsage {
            allocated_bytes: 0,
            apparent_bytes: 0,
            parts: Vec::new(),
        };
        let mut entries = list(dir)?;
        entries.sort();
        for path in entries {
            let (allocated, apparent) = usage_of(&path, 0)?;
            usage.allocated_bytes += allocated;
            usage.apparent_bytes += apparent;
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into());
            usage.parts.push((name, allocated));
        }
        Ok(usage)
    }
}

fn list(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let read = |e: std::io::Error| format!("cannot list {}: {e}", dir.display());
    std::fs::read_dir(dir)
        .map_err(read)?
        .map(|entry| entry.map(|e| e.path()).map_err(read))
        .collect()
}

/// (allocated, apparent) bytes of a file, or of a directory's files.
fn usage_of(path: &Path, depth: usize) -> Result<(u64, u64), String> {
    assert!(depth <= DEPTH_MAX, "{} is nested too deep", path.display());
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Ok((crate::platform::allocated_bytes(&meta), meta.len()));
    }
    let mut total = (0, 0);
    if depth < DEPTH_MAX {
        for child in list(path)? {
            let (allocated, apparent) = usage_of(&child, depth + 1)?;
            total = (total.0 + allocated, total.1 + apparent);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_nested_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("wal")).expect("mkdir");
        std::fs::write(dir.path().join("wal").join("a"), vec![1; 5000]).expect("write");
        std::fs::write(dir.path().join("b"), vec![1; 100]).expect("write");
        let usage = DiskUsage::of(dir.path()).expect("usage");
        assert_eq!(usage.apparent_bytes, 5100);
        let names: Vec<&str> = usage.parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "wal"]);
    }
}
