//! Acknowledgement files: what a load that may be killed (`till crashtest`'s children,
//! `till demo --ack-file`) tells its checker it acknowledged.
//!
//! ```text
//! <n>\n        one line per acknowledged item, decimal, appended after its commit returned
//! ```
//!
//! Each line is appended with one write call, so a kill -9 leaves it whole or absent: with two
//! (`writeln!` writes the number, then the newline) a kill between them left `6449`, the next
//! process appended `6450\n`, and the checker read sale `64496450` as acknowledged and lost
//! (found by `scripts/prove`'s shipping chaos test, and before it by `till crashtest`). A
//! reader counts only lines ended by a newline, and a writer that finds the file ending
//! without one (a file written before, or a write the OS cut short) ends that line first.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

/// An acknowledgement file open for appending.
pub struct AckFile {
    file: File,
}

impl AckFile {
    /// Opens (or creates) `path` for appending, first ending a line a kill cut short so the
    /// next number starts a line of its own.
    pub fn open(path: &Path) -> io::Result<AckFile> {
        let ends_cut = std::fs::read(path).is_ok_and(|b| b.last().is_some_and(|&c| c != b'\n'));
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        if ends_cut {
            file.write_all(b"\n")?;
        }
        Ok(AckFile { file })
    }

    /// Appends `n`'s line.
    pub fn ack(&mut self, n: u64) -> io::Result<()> {
        write_line(&mut self.file, n)
    }
}

/// Writes `n`'s line with one write call.
fn write_line(out: &mut impl Write, n: u64) -> io::Result<()> {
    out.write_all(format!("{n}\n").as_bytes())
}

/// The numbers of the whole lines of `path`, in file order; none when it does not exist.
pub fn read(path: &Path) -> io::Result<Vec<u64>> {
    let mut text = String::new();
    match File::open(path) {
        Ok(mut file) => file.read_to_string(&mut text)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the write calls made to it.
    #[derive(Default)]
    struct Calls {
        bytes: Vec<u8>,
        calls: usize,
    }

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The shipping chaos test's false loss: `writeln!` wrote `6449` and its newline in two
    /// calls, a kill fell between them, and the next run's `6450` joined the line.
    #[test]
    fn an_ack_line_is_one_write_so_a_kill_cannot_join_two() {
        let mut out = Calls::default();
        write_line(&mut out, 6449).expect("write");
        assert_eq!(out.bytes, b"6449\n");
        assert_eq!(
            out.calls, 1,
            "a kill between two calls leaves a line without its end"
        );
    }

    #[test]
    fn a_line_cut_by_a_kill_is_ended_before_the_next_and_only_whole_lines_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("acks");
        assert_eq!(read(&path).expect("read"), Vec::<u64>::new());
        std::fs::write(&path, "1\n2\n64").expect("write");
        assert_eq!(read(&path).expect("read"), vec![1, 2]);
        let mut acks = AckFile::open(&path).expect("open");
        acks.ack(3).expect("ack");
        assert_eq!(read(&path).expect("read"), vec![1, 2, 64, 3]);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "1\n2\n64\n3\n"
        );
    }
}
