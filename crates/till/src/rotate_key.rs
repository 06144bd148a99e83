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
    /// given as to every command (--key-file, --key-dpapi, `TILLDB_KEY_FILE`, `TILLDB_KEY`).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "new_key_dpapi",
        conflicts_with = "new_key_dpapi"
    )]
    new_key_file: Option<PathBuf>,
    /// The new key is the one Windows keeps (DPAPI) for this user or this machine: the
    /// database then opens with `--key-dpapi SCOPE` on this machine only.
    #[arg(long, value_name = "SCOPE", value_enum)]
    new_key_dpapi: Option<crate::key::DpapiScope>,
}

pub fn run(args: &RotateKeyArgs) -> CliResult<()> {
    inspect::require_database(&args.dir)?;
    let new: Arc<dyn KeyProvider> = match (&args.new_key_file, args.new_key_dpapi) {
        (Some(path), _) => {
            let key = crate::key::read_key_file(path)?;
            Arc::new(StaticKey::new(&key))
        }
        // Refused before the database is opened, so the refusal changes no file.
        (None, Some(_)) if tilldb::OsKeyStore::available().is_none() => {
            return Err(
                "--new-key-dpapi: this platform has no OS key store tilldb uses (DPAPI \
                        is Windows'); give --new-key-file"
                    .into(),
            );
        }
        (None, Some(scope)) => scope.encryption().provider,
        (None, None) => unreachable!("clap requires one of them"),
    };
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
