//! The till a shipper reads: a database directory on a storage. `till ship` reads real files
//! (`Till::on_files`); the year-long test of `year.rs` runs the same shipper over a
//! simulated disk (`tilldb::io::SimDisk`), through this one seam rather than a second code
//! path. Every read of the till's files, and the `--resync` open, goes through here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::feed::{self, ConsumerState, Feed};
use tilldb::internals::crypt::Encryption;
use tilldb::io::{FileStorage, Storage};
use tilldb::{Db, Lsn, Options};

/// A till's database directory and the storage it lives on.
pub struct Till {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    /// An encrypted till's key: its feed's records are opened with it.
    encryption: Option<Encryption>,
}

impl Till {
    /// The till in `dir` on the real file system.
    pub fn on_files(dir: &Path) -> Till {
        Till::on(Arc::new(FileStorage::new()), dir)
    }

    /// The till in `dir` on `storage`.
    pub fn on(storage: Arc<dyn Storage>, dir: &Path) -> Till {
        Till {
            storage,
            dir: dir.to_path_buf(),
            encryption: None,
        }
    }

    /// This till, its feed read with `encryption` (an encrypted database's key).
    pub fn with_key(self, encryption: Option<Encryption>) -> Till {
        Till { encryption, ..self }
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The feed's start ([`feed::start`]).
    pub fn start(&self) -> tilldb::Result<Lsn> {
        feed::start_with_storage(&*self.storage, &self.dir)
    }

    /// The feed's named consumers ([`feed::consumers`]).
    pub fn consumers(&self) -> tilldb::Result<Vec<ConsumerState>> {
        feed::consumers_with_storage(&*self.storage, &self.dir)
    }

    /// The durable lsn the till's writer published ([`feed::published_durable`]).
    pub fn published_durable(&self) -> tilldb::Result<Option<Lsn>> {
        feed::published_durable_with_storage(&*self.storage, &self.dir)
    }

    /// The named consumer's feed ([`Feed::open_consumer`]).
    pub fn open_consumer(&self, name: &str) -> tilldb::Result<Feed> {
        Feed::open_consumer_encrypted(
            Arc::clone(&self.storage),
            &self.dir,
            name,
            self.encryption.as_ref(),
        )
    }

    /// The feed from `from`, as no consumer ([`Feed::open`]).
    pub fn open_feed(&self, from: Lsn) -> tilldb::Result<Feed> {
        Feed::open_encrypted(
            Arc::clone(&self.storage),
            &self.dir,
            from,
            None,
            self.encryption.as_ref(),
        )
    }

    /// Registers (or moves) the named consumer at `at` ([`feed::register_consumer`]).
    pub fn register_consumer(&self, name: &str, at: Lsn) -> tilldb::Result<()> {
        feed::register_consumer_with_storage(&*self.storage, &self.dir, name, at)
    }

    /// Whether the directory holds a database (its header file).
    pub fn has_database(&self) -> tilldb::Result<bool> {
        self.storage
            .exists(&self.dir.join(tilldb::internals::header::HEADER_FILE_NAME))
    }

    /// Opens the till's database ([`Db::open`]): exclusive, so only when no other process
    /// has it (`--resync`).
    pub fn open_db(&self, options: Options) -> tilldb::Result<Db> {
        let options = Options {
            encryption: self.encryption.clone(),
            ..options
        };
        Db::open_with_storage(Arc::clone(&self.storage), &self.dir, options)
    }
}
