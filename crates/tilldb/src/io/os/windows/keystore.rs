//! The OS's key store on Windows: DPAPI (`CryptProtectData`, `CryptUnprotectData`), which
//! seals bytes under a key Windows derives from the user's logon secret or, in machine scope,
//! from a secret of the machine, and keeps on no disk tilldb writes. `crypt/os_key.rs` wraps a
//! database's data key with it.

use crate::crypt::KeyError;
use windows_sys::Win32::Foundation::LocalFree;
use windows_sys::Win32::Security::Cryptography::{
    CRYPT_INTEGER_BLOB, CRYPTPROTECT_LOCAL_MACHINE, CRYPTPROTECT_UI_FORBIDDEN, CryptProtectData,
    CryptUnprotectData,
};
use zeroize::Zeroizing;

/// `NTE_BAD_DATA` as `GetLastError` reports it (an HRESULT, 0x80090005).
const NTE_BAD_DATA: i32 = 0x8009_0005_u32.cast_signed();

/// Whether this platform has an OS key store (`protect` and `unprotect` work).
pub const KEY_STORE: Option<&str> = Some("DPAPI");

/// A blob over `bytes`, for the functions' inputs (which they do not write).
fn blob(bytes: &[u8]) -> Result<CRYPT_INTEGER_BLOB, KeyError> {
    Ok(CRYPT_INTEGER_BLOB {
        cbData: u32::try_from(bytes.len())
            .map_err(|_| KeyError::Malformed("longer than DPAPI takes"))?,
        pbData: bytes.as_ptr().cast_mut(),
    })
}

/// The bytes of an output blob, copied into `Zeroizing` memory; the blob is wiped and freed.
///
/// # Safety
/// `out` is a blob DPAPI returned: `cbData` bytes at `pbData`, allocated with `LocalAlloc`.
unsafe fn take(out: CRYPT_INTEGER_BLOB) -> Zeroizing<Vec<u8>> {
    if out.pbData.is_null() {
        return Zeroizing::new(Vec::new());
    }
    // SAFETY: per this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts_mut(out.pbData, out.cbData as usize) };
    let copy = Zeroizing::new(bytes.to_vec());
    zeroize::Zeroize::zeroize(bytes);
    // SAFETY: DPAPI allocated it with LocalAlloc; freed once, here.
    unsafe { LocalFree(out.pbData.cast()) };
    copy
}

fn flags(machine: bool) -> u32 {
    CRYPTPROTECT_UI_FORBIDDEN
        | if machine {
            CRYPTPROTECT_LOCAL_MACHINE
        } else {
            0
        }
}

/// `data` sealed by DPAPI with `entropy` bound to it, for this user or (with `machine`) any
/// process on this machine.
pub fn protect(data: &[u8], entropy: &[u8], machine: bool) -> Result<Vec<u8>, KeyError> {
    let (input, entropy) = (blob(data)?, blob(entropy)?);
    let mut out = CRYPT_INTEGER_BLOB {
        cbData: 0,
        pbData: std::ptr::null_mut(),
    };
    // SAFETY: the input blobs point to live slices; `out` is written by the call.
    let ok = unsafe {
        CryptProtectData(
            &raw const input,
            std::ptr::null(),
            &raw const entropy,
            std::ptr::null(),
            std::ptr::null(),
            flags(machine),
            &raw mut out,
        )
    };
    if ok == 0 {
        return Err(KeyError::Provider(format!(
            "DPAPI could not protect the key: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a blob CryptProtectData returned.
    Ok(unsafe { take(out) }.to_vec())
}

/// The bytes `protect` sealed in `sealed` with `entropy`; `WrongKey` when DPAPI cannot open
/// them here (another user or machine, other entropy, or changed bytes).
pub fn unprotect(
    sealed: &[u8],
    entropy: &[u8],
    machine: bool,
) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let (input, entropy) = (blob(sealed)?, blob(entropy)?);
    let mut out = CRYPT_INTEGER_BLOB {
        cbData: 0,
        pbData: std::ptr::null_mut(),
    };
    // SAFETY: the input blobs point to live slices; `out` is written by the call.
    let ok = unsafe {
        CryptUnprotectData(
            &raw const input,
            std::ptr::null_mut(),
            &raw const entropy,
            std::ptr::null(),
            std::ptr::null(),
            flags(machine),
            &raw mut out,
        )
    };
    if ok == 0 {
        let error = std::io::Error::last_os_error();
        // ERROR_INVALID_DATA and NTE_BAD_DATA: not sealed by this user or machine with this
        // entropy, or changed. Anything else (a profile not loaded, a master key unavailable)
        // is the key store's failure, not another key.
        return Err(match error.raw_os_error() {
            Some(13 | NTE_BAD_DATA) => KeyError::WrongKey,
            _ => KeyError::Provider(format!("DPAPI could not unprotect the key: {error}")),
        });
    }
    // SAFETY: a blob CryptUnprotectData returned.
    Ok(unsafe { take(out) })
}
