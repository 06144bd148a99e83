//! What Linux and macOS share: `errno` codes, `flock` locks, positional I/O loops. Each
//! platform module uses these and adds its own open flags, flushes and device facts.

pub mod errno;
pub(crate) mod io;
pub mod keystore;
pub(crate) mod lock;
