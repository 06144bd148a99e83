//! The database's fail-stop switch ([`Poison`]).

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The database's fail-stop switch: set by the first failed write or flush (by a commit, a
/// checkpoint, the background writer, or any page write-back: `pages.rs`), with that
/// failure's text; never cleared (reopen).
#[derive(Debug, Default)]
pub(crate) struct Poison {
    set: AtomicBool,
    cause: Mutex<Option<String>>,
}

impl Poison {
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Records `error` as the cause, unless an earlier one is recorded.
    pub(crate) fn set(&self, error: &Error) {
        let mut cause = self.cause.lock();
        if cause.is_none() {
            let text = match error {
                Error::PoisonedBy { cause } => cause.clone(),
                other => other.to_string(),
            };
            tracing::error!(
                target: "tilldb",
                cause = %text,
                "database stopped after a failed write or flush (fail-stop); reopen to recover"
            );
            *cause = Some(text);
        }
        self.set.store(true, Ordering::Release);
    }

    /// `Err(PoisonedBy)` once set.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.is_set() {
            return Ok(());
        }
        let cause = self.cause.lock().clone();
        Err(Error::PoisonedBy {
            cause: cause.unwrap_or_else(|| "an earlier write or flush failed".to_owned()),
        })
    }
}
