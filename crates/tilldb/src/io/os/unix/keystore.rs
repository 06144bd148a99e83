//! No OS key store here yet (macOS's Keychain and Linux's kernel keyring would enter here):
//! `crypt/os_key.rs`'s provider reports `KeyError::Provider` and changes nothing.

use crate::crypt::KeyError;
use zeroize::Zeroizing;

/// Whether this platform has an OS key store (`protect` and `unprotect` work).
pub const KEY_STORE: Option<&str> = None;

fn unsupported() -> KeyError {
    KeyError::Provider("this platform has no OS key store tilldb uses (DPAPI is Windows')".into())
}

/// Always `KeyError::Provider`: no key store.
pub fn protect(_data: &[u8], _entropy: &[u8], _machine: bool) -> Result<Vec<u8>, KeyError> {
    Err(unsupported())
}

/// Always `KeyError::Provider`: no key store.
pub fn unprotect(
    _sealed: &[u8],
    _entropy: &[u8],
    _machine: bool,
) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    Err(unsupported())
}
