//! `till rotate-key DIR --new-key-file NEW`: replaces an encrypted database's application key
//! (`Db::rotate_key`, docs/encryption.md section 4). The database is opened with its current
//! key (`--key-file`, `TILLDB_KEY_FILE` or `TILLDB_KEY`, as every command takes it), its data
//! key is wrapped by the new one in the header's crash-safe write, and from then on it opens
//! with the new key only. Nothing else is rewritten; no other process may have it open.

use crate::inspect::{self, CliResult};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use tilldb::{Db, Error};
use tilldb::{KeyProvider, StaticKey};

#[derive(Args, Debug)]
pub struct RotateKeyArgs {
    /// The encrypted database.
    dir: PathBuf,
    /// The new key: a file of its 32 bytes, or of 64 hexadecimal digits. The current key is
    /// given as to every command (--key-file, `TILLDB_KEY_FILE`, `TILLDB_KEY`).
    #[arg(long, value_name = "FILE")]
    new_key_file: PathBuf,
}

pub fn run(args: &RotateKeyArgs) -> CliResult<()> {
    inspect::require_database(&args.dir)?;
    let key = crate::key::read_key_file(&args.new_key_file)?;
    let new: Arc<dyn KeyProvider> = Arc::new(StaticKey::new(&key));
    let db = match Db::open(&args.dir, crate::key::options()?) {
        Ok(db) => db,
        Err(e @ Error::Locked { .. }) => {
            return Err(format!("{e}; stop the process that has it open, then rotate").into());
        }
        Err(e) => return Err(e.into()),
    };
    let new_id = new.key_id();
    db.rotate_key(new)?;
    db.close()?;
    println!(
        "{}: its data key is now wrapped by the key \"{new_id}\" only; open it with that key",
        args.dir.display()
    );
    Ok(())
}
