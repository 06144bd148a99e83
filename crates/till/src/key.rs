//! The application's key of an encrypted database, for every command that opens one
//! (docs/encryption.md, piece 7): `--key-file FILE` (a flag of every command), else
//! `--key-dpapi SCOPE` (the key Windows keeps, `OsKeyStore`), else the environment's
//! `TILLDB_KEY_FILE`, else `TILLDB_KEY`. A key file holds the 32 bytes of the key, or 64
//! hexadecimal digits (a trailing newline allowed); `TILLDB_KEY` holds the 64 digits. The key
//! is a [`StaticKey`], named `kek:` and 16 hex digits derived from it, which the database's
//! header records: the wrong key is told apart from a damaged file.
//!
//! No key byte is ever printed: errors name the file and say what its length is wrong by.
//! The bytes read are zeroed once the key is made.

use crate::inspect::CliResult;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tilldb::internals::crypt::DatabaseKeys;
use tilldb::internals::header::Header;
use tilldb::{Cipher, Encryption, Options, OsKeyScope, OsKeyStore};
use zeroize::Zeroizing;

/// The environment variable naming a key file.
pub const KEY_FILE_VAR: &str = "TILLDB_KEY_FILE";
/// The environment variable holding a key, as 64 hexadecimal digits.
pub const KEY_VAR: &str = "TILLDB_KEY";

/// The `--key-file` given on the command line, set once by `main`.
static KEY_FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
/// The `--key-dpapi` given on the command line, set once by `main`.
static KEY_DPAPI: OnceLock<Option<DpapiScope>> = OnceLock::new();

/// Whose key DPAPI keeps (`--key-dpapi`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DpapiScope {
    /// The Windows user `till` runs as.
    User,
    /// Any process on this machine (a till's service).
    Machine,
}

impl DpapiScope {
    /// The application's key DPAPI keeps for this scope.
    pub fn encryption(self) -> Encryption {
        let scope = match self {
            DpapiScope::User => OsKeyScope::User,
            DpapiScope::Machine => OsKeyScope::Machine,
        };
        Encryption::new(Arc::new(OsKeyStore::new(scope)))
    }
}

/// Records the command line's `--key-file` and `--key-dpapi` (once, before any command
/// runs).
pub fn set_key_source(path: Option<PathBuf>, dpapi: Option<DpapiScope>) {
    KEY_FILE
        .set(path)
        .expect("the key file is set once, by main");
    KEY_DPAPI
        .set(dpapi)
        .expect("the DPAPI scope is set once, by main");
}

/// The `--key-file` of the command line, if one was given (a child process is passed it on).
pub fn key_file_flag() -> Option<PathBuf> {
    KEY_FILE.get().cloned().flatten()
}

/// The `--key-dpapi` of the command line as its arguments, for a child process.
pub fn key_dpapi_args() -> Vec<std::ffi::OsString> {
    match KEY_DPAPI.get().copied().flatten() {
        Some(DpapiScope::User) => vec!["--key-dpapi".into(), "user".into()],
        Some(DpapiScope::Machine) => vec!["--key-dpapi".into(), "machine".into()],
        None => Vec::new(),
    }
}

/// The application's key this run was given (`--key-file`, `--key-dpapi`,
/// `TILLDB_KEY_FILE`, `TILLDB_KEY`), as `Options::encryption` takes it; `None` when none was.
pub fn encryption() -> CliResult<Option<Encryption>> {
    let flag = KEY_FILE.get().cloned().flatten();
    if flag.is_none()
        && let Some(scope) = KEY_DPAPI.get().copied().flatten()
    {
        return Ok(Some(scope.encryption()));
    }
    let file = flag.or_else(|| std::env::var_os(KEY_FILE_VAR).map(PathBuf::from));
    let key = match file {
        Some(path) => read_key_file(&path)?,
        None => match std::env::var(KEY_VAR) {
            Ok(text) => {
                let text = Zeroizing::new(text);
                parse_hex(text.trim().as_bytes()).map_err(|why| format!("{KEY_VAR}: {why}"))?
            }
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{KEY_VAR} is not 64 hexadecimal digits").into());
            }
        },
    };
    Ok(Some(Encryption::with_key(&key)))
}

/// A cipher named on the command line (`--cipher`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CipherArg {
    /// AES-256-GCM: the default, and the fastest where the CPU has AES instructions.
    #[value(name = "aes-256-gcm")]
    Aes256Gcm,
    /// ChaCha20-Poly1305: faster on a CPU without AES instructions.
    #[value(name = "chacha20-poly1305")]
    Chacha20Poly1305,
}

impl CipherArg {
    /// The cipher it names.
    pub fn cipher(self) -> Cipher {
        match self {
            CipherArg::Aes256Gcm => Cipher::Aes256Gcm,
            CipherArg::Chacha20Poly1305 => Cipher::ChaCha20Poly1305,
        }
    }
}

/// The key in the key file at `path`: its 32 bytes, or 64 hexadecimal digits.
pub fn read_key_file(path: &Path) -> CliResult<Zeroizing<[u8; 32]>> {
    let bytes =
        Zeroizing::new(std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?);
    Ok(parse(&bytes).map_err(|why| format!("the key file {}: {why}", path.display()))?)
}

/// `Options::default()` with the key this run was given.
pub fn options() -> CliResult<Options> {
    Ok(Options {
        encryption: encryption()?,
        ..Options::default()
    })
}

/// The keys of the database in `dir` (header `header`) that this run's key opens, for
/// commands that read its files without opening it: `None` for a plain database. A missing
/// or wrong key is the error `Db::open` gives, naming the key id.
pub fn database_keys(dir: &Path, header: &Header) -> CliResult<Option<Arc<DatabaseKeys>>> {
    let encryption = encryption()?;
    Ok(tilldb::internals::crypt::database_keys(
        dir,
        header,
        encryption.as_ref(),
    )?)
}

/// A key file's 32 bytes: the key itself, or 64 hexadecimal digits with white space around.
fn parse(bytes: &[u8]) -> Result<Zeroizing<[u8; 32]>, String> {
    if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
        return Ok(Zeroizing::new(raw));
    }
    parse_hex(bytes.trim_ascii()).map_err(|why| {
        format!(
            "{why} (a key file holds the key's 32 bytes, or 64 hexadecimal digits; this one \
             holds {} bytes)",
            bytes.len()
        )
    })
}

/// 64 hexadecimal digits as 32 bytes.
fn parse_hex(digits: &[u8]) -> Result<Zeroizing<[u8; 32]>, String> {
    if digits.len() != 64 {
        return Err(format!(
            "a key is 64 hexadecimal digits, not {}",
            digits.len()
        ));
    }
    let mut key = Zeroizing::new([0u8; 32]);
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let digit = |d: u8| {
            char::from(d)
                .to_digit(16)
                .ok_or_else(|| "a key holds only hexadecimal digits".to_owned())
        };
        let value = digit(pair[0])? * 16 + digit(pair[1])?;
        *byte = u8::try_from(value).expect("two hex digits");
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_holds_32_bytes_or_64_hex_digits() {
        let raw = [7u8; 32];
        assert_eq!(*parse(&raw).expect("raw"), raw);
        let hex = "07".repeat(32);
        assert_eq!(*parse(hex.as_bytes()).expect("hex"), raw);
        assert_eq!(*parse(format!("{hex}\n").as_bytes()).expect("newline"), raw);
        assert_eq!(
            *parse(hex.to_uppercase().as_bytes()).expect("upper case"),
            raw
        );
        let short = parse(b"0707").expect_err("short");
        assert!(short.contains("holds 4 bytes"), "{short}");
        let bad = parse("zz".repeat(32).as_bytes()).expect_err("not hex");
        assert!(bad.contains("hexadecimal"), "{bad}");
        assert!(!bad.contains("zz"), "the error repeats the key: {bad}");
    }
}
