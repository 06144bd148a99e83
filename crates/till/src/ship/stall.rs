//! A guard against a feed that stops short. A long-lived `Feed` can stop returning
//! transactions while the till's log holds durable commits after its position: seen in the
//! chaos test of `ship_cli.rs` (issue 34), where a writer killed mid-write left a torn record
//! at lsn P in its segment, the reopened log went on in a newer segment based at P, and a
//! follower that came to P through the old segment took the torn record for one not yet
//! durable and waited for ever (`LogFollower::read` in `crates/tilldb/src/wal/follow.rs`);
//! `till ship --once` then printed "caught up" thousands of transactions short. A feed opened
//! afresh at P finds the newer segment and reads on.
//!
//! So whenever the shipper's feed has nothing, it asks a fresh feed at the same position:
//!
//! ```text
//! fresh feed at the position   the shipper's feed, asked again   decision
//! nothing                      (not asked)                       caught up
//! a commit                     a commit                          go on: it became durable
//!                                                                between the two looks
//! a commit                     nothing                           stalled: warn, naming the
//!                                                                lsns, and reopen the feed
//! ```

use super::exit::{Exit, Failure};
use std::path::Path;
use std::time::Duration;
use tilldb::Lsn;
use tilldb::feed::{Feed, FeedTxn};

/// After `feed` read nothing: the next transaction to ship, or `None` when caught up. A
/// stalled feed is reopened at its consumer's position (with a warning naming the lsns) and
/// read again; `reopened_at` remembers where, and a feed that stalls there again is a
/// failure of the till's log, not something to loop on.
pub fn after_empty_read(
    dir: &Path,
    consumer: &str,
    feed: &mut Feed,
    reopened_at: &mut Option<Lsn>,
) -> Result<Option<FeedTxn>, Failure> {
    let next_lsn = match look_again(dir, feed)? {
        Idle::CaughtUp => return Ok(None),
        Idle::More(txn) => return Ok(Some(txn)),
        Idle::Stalled { next_lsn } => next_lsn,
    };
    let position = feed.position();
    if *reopened_at == Some(position) {
        return Err(Failure::new(
            Exit::Till,
            format!(
                "{}: the feed stops at lsn {} although a durable commit ending at lsn \
                 {next_lsn} follows, even reopened there",
                dir.display(),
                position.0
            ),
        ));
    }
    eprintln!(
        "till ship: warning: the till's feed stopped at lsn {} although a durable commit \
         ending at lsn {next_lsn} follows (a torn record left by a killed writer, the log \
         going on in a newer segment: see ship/stall.rs); reading on from the feed reopened \
         there",
        position.0
    );
    // Every batch was acknowledged, so the consumer resumes where this feed stood (or where
    // another shipper of this till moved it: the watermark skips what PostgreSQL holds).
    *feed = Feed::open_consumer(dir, consumer)?;
    *reopened_at = Some(position);
    Ok(feed.next(Duration::ZERO)?)
}

/// What the shipper's idle feed turned out to be.
enum Idle {
    CaughtUp,
    /// The next transaction, returned by the shipper's feed when asked again.
    More(FeedTxn),
    /// A fresh feed at the same position returned this transaction's lsn; the shipper's
    /// feed, asked again after it, still returned nothing.
    Stalled {
        next_lsn: u64,
    },
}

/// Looks behind an empty read of `feed` (see the module doc).
fn look_again(dir: &Path, feed: &mut Feed) -> Result<Idle, Failure> {
    let mut fresh = Feed::open(dir, feed.position())?;
    let Some(next) = fresh.next(Duration::ZERO)? else {
        return Ok(Idle::CaughtUp);
    };
    assert!(next.lsn > feed.position(), "a fresh feed went backwards");
    // The commit `fresh` returned is durable: the shipper's feed, asked after it, must
    // return it (or an earlier one) unless it stopped short.
    Ok(match feed.next(Duration::ZERO)? {
        Some(txn) => Idle::More(txn),
        None => Idle::Stalled {
            next_lsn: next.lsn.0,
        },
    })
}
