//! How `till ship` ends: its exit status, and the failures that lead to each. A failure's
//! message names what to do; a PostgreSQL error carries the server's own message and
//! SQLSTATE, since "db error" alone tells an operator nothing.

use std::error::Error as _;
use std::fmt::Write as _;

/// `till ship`'s exit statuses; `docs/feed.md` ("Exit status") has the same table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The till's database failed: I/O, corruption, its feed off or unavailable.
    Till = 1,
    /// The command line is wrong: `--to` is not a PostgreSQL URL, `--batch 0`. Clap's own
    /// usage errors exit 2 too.
    Usage = 2,
    /// Refused: PostgreSQL and the till disagree about what was shipped (no watermark, or
    /// one behind what the till's consumer acknowledged, or the consumer dropped). Nothing
    /// was changed; an operator decides (`--resync`).
    Refused = 3,
    /// PostgreSQL refused with an error a retry would meet again (a missing database, a
    /// permission, a table of another schema).
    PostgresRefused = 4,
    /// PostgreSQL unreachable, or failing transiently, through the bounded retries.
    PostgresUnavailable = 5,
    /// `--resync` needs the database to itself, and another process has it open.
    Locked = 6,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Why shipping stopped.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
        }
    }

    /// A later attempt may succeed: the connection, a restart, a serialization failure.
    pub fn is_transient(&self) -> bool {
        self.exit == Exit::PostgresUnavailable
    }
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        // Without a SQLSTATE, the connection (refused, cut, closed) is transient; anything
        // else (authentication, a protocol error) is not.
        let transient = match e.code() {
            Some(code) => is_transient(code.code()),
            None => e.is_closed() || has_io_source(&e),
        };
        let exit = if transient {
            Exit::PostgresUnavailable
        } else {
            Exit::PostgresRefused
        };
        Failure::new(exit, describe(&e))
    }
}

impl From<tilldb::Error> for Failure {
    fn from(e: tilldb::Error) -> Self {
        match e {
            // The feed cannot give what PostgreSQL lacks: the log is gone, or never held the
            // writes. Only a copy of the whole state helps, which an operator decides on.
            tilldb::Error::FeedConsumerDropped { .. } | tilldb::Error::FeedUnavailable { .. } => {
                Failure::new(
                    Exit::Refused,
                    format!(
                        "refused: {e}. Nothing was changed in PostgreSQL; `till ship --resync` \
                         ships the till's whole current state and follows the feed from there"
                    ),
                )
            }
            tilldb::Error::Locked { .. } => Failure::new(Exit::Locked, e.to_string()),
            _ => Failure::new(Exit::Till, e.to_string()),
        }
    }
}

/// SQLSTATEs a later attempt may not meet: connection exceptions (08), operator
/// intervention such as a shutdown (57), serialization failures and deadlocks.
fn is_transient(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("57") || code == "40001" || code == "40P01"
}

fn has_io_source(e: &postgres::Error) -> bool {
    let mut source = e.source();
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A PostgreSQL error in full: the server's severity, SQLSTATE, message, detail and hint;
/// or, for an error of the client or the connection, each cause in turn.
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "PostgreSQL {} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        );
        if let Some(detail) = db.detail() {
            let _ = write!(text, "; detail: {detail}");
        }
        if let Some(hint) = db.hint() {
            let _ = write!(text, "; hint: {hint}");
        }
        return text;
    }
    let mut text = format!("PostgreSQL: {e}");
    let mut source = e.source();
    // A chain of causes is short (the client wraps an I/O error once or twice).
    let mut depth = 0;
    while let Some(cause) = source {
        assert!(depth < 16, "a cycle of error sources");
        let _ = write!(text, ": {cause}");
        source = cause.source();
        depth += 1;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_and_shutdown_sqlstates_are_transient_the_rest_are_not() {
        for code in ["08006", "08001", "57P01", "57P03", "40001", "40P01"] {
            assert!(is_transient(code), "{code}");
        }
        for code in ["3D000", "42703", "42P01", "28P01", "23505"] {
            assert!(!is_transient(code), "{code}");
        }
    }
}
