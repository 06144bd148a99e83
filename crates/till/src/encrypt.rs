//! `till encrypt DIR`: turns a plain database into an encrypted one in place
//! (docs/encryption.md, piece 7). The key is given as to every command (`--key-file`,
//! `TILLDB_KEY_FILE`, `TILLDB_KEY`); the database is opened without it.
//!
//! ```text
//!  1. refuse when no key is given, when DIR is already encrypted (till compact --rekey
//!     replaces its data key), and when its change feed is or was on (as compaction does:
//!     drain till ship, encrypt, then register the consumer again with --resync)
//!  2. the steps of till compact (compact.rs): an encrypted copy under a new data key,
//!     wrapped by the key, checked by opening it with the key, swapped into DIR's place
//! ```
//!
//! A key longer than an encrypted page allows (its pages keep 40 bytes for the seal) stops
//! the copy and names its table; DIR is unchanged. The plain files are removed once the copy
//! is in place, not wiped: the file system, an SSD or a backup may keep their blocks, which
//! the command says on standard error. A till that can should be created encrypted.

use crate::compact::{self, CopyKey};
use clap::Args;
use std::path::PathBuf;
use tilldb::{Error, Options};

#[derive(Args, Debug)]
pub struct EncryptArgs {
    /// The plain database to encrypt. No other process may have it open.
    dir: PathBuf,
    /// Print JSON (stable for scripts), as `till compact --json` does.
    #[arg(long)]
    json: bool,
    /// The cipher of the encrypted database [default: aes-256-gcm where the CPU has AES
    /// instructions, else chacha20-poly1305].
    #[arg(long, value_enum)]
    cipher: Option<crate::key::CipherArg>,
}

pub fn run(args: &EncryptArgs) -> Result<(), Box<dyn std::error::Error>> {
    let Some(encryption) = crate::key::encryption()? else {
        return Err(format!(
            "till encrypt needs the key to encrypt {} with: --key-file FILE (32 bytes, or 64 \
             hexadecimal digits), {} or {}",
            args.dir.display(),
            crate::key::KEY_FILE_VAR,
            crate::key::KEY_VAR
        )
        .into());
    };
    // The key's encryption already carries this CPU's cipher.
    let encryption = match args.cipher {
        Some(cipher) => encryption.with_cipher(cipher.cipher()),
        None => encryption,
    };
    // Opened without the key: an encrypted database refuses to open, and says so.
    let result = compact::in_place(
        &args.dir,
        args.json,
        Options::default(),
        CopyKey::Encrypt(encryption),
    );
    match result {
        Err(e) if matches!(e.downcast_ref(), Some(Error::KeyRequired { .. })) => {
            // Encrypted already, perhaps by a run killed after its swap and before it removed
            // the plain database beside it: no process has the database open (the open just
            // refused for the key, not the lock), so that leftover goes now.
            compact::remove_leftovers(&args.dir)?;
            Err(format!(
                "{} is already encrypted; till compact --rekey gives it a new data key",
                args.dir.display()
            )
            .into())
        }
        Err(e) => Err(e),
        Ok(()) => {
            eprintln!(
                "note: the plain files of {} were removed, not wiped: the file system, the \
                 disk and any backup may still hold their blocks",
                args.dir.display()
            );
            Ok(())
        }
    }
}
