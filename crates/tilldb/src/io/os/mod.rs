//! The operating system under [`super::FileStorage`]: one module per platform, chosen here and
//! nowhere else. Each provides the same items:
//!
//! - `open(path, method, access, op)`: a [`super::StorageFile`] opened as its flush method
//!   needs, with positional reads and writes and the method's flush;
//! - `supports(method)`: whether the platform has the method (others are refused at open);
//! - `rename`, `flush_dir`: a rename and making a directory's changes durable;
//! - `exchange`: two existing names swapped in one step (`Unsupported` where not built yet);
//! - `lock_file`: the database lock;
//! - `impl DeviceFacts { for_dir, for_dir_read_only, for_file }` and `atomic_write_supported`;
//! - `keystore`: the OS's key store (`KEY_STORE`, `protect`, `unprotect`: DPAPI on Windows;
//!   none elsewhere yet), for `crypt::OsKeyStore`;
//! - `errno`: the native error codes the simulated disk and the portable code report
//!   (`EIO`, `ENOSPC`, ... as this platform spells them).

#[cfg(unix)]
mod unix;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
