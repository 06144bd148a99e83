//! Before it writes anything, on either side, the shipper compares what the till says was
//! shipped (its feed consumer's acknowledged position) with what PostgreSQL says it holds
//! (the till's watermark). When they disagree it refuses, naming both positions and what to
//! do: shipping on would skip transactions PostgreSQL never got, and say nothing.
//!
//! The consumer acknowledges only after PostgreSQL committed (`mod.rs`), and PostgreSQL gets
//! only what the till published as durable, so in every honest state
//!
//! ```text
//! consumer position  <=  watermark  <=  the till's published durable lsn
//! ```
//!
//! The three are read in that order, each after the one it must not pass, so a second
//! shipper (or the till's writer) moving them between the reads cannot make an honest state
//! look like a disagreement.

use super::exit::{Exit, Failure};
use tilldb::Lsn;

/// What the till and PostgreSQL say was shipped, read before either is written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positions {
    /// The till's feed start: where a new consumer begins.
    pub start: Lsn,
    /// The shipper's consumer: its acknowledged position; `None` when never registered.
    pub consumer: Option<Lsn>,
    /// Why the consumer was dropped, if it was.
    pub dropped: Option<String>,
    /// The lsn the till's log is durable to, as its writer published it (`feed/durable`);
    /// `None` when it could not be read.
    pub durable: Option<Lsn>,
    /// PostgreSQL's watermark for this till id; `None` when it holds none.
    pub watermark: Option<Lsn>,
}

/// The names the refusal messages use.
pub struct Names<'a> {
    pub till_id: &'a str,
    pub consumer: &'a str,
}

/// Whether to ship, one row per case:
///
/// ```text
/// consumer           watermark W            decision
/// dropped            any                    refuse: the till reused log it never shipped
/// any                past the till's        refuse: PostgreSQL holds transactions this till
///                    durable log end        never made (another till ships under this id,
///                                           or the till's database was restored)
/// never registered   none                   ship from the feed's start (the first shipment)
/// never registered   at or past the start   ship, skipping up to W
/// never registered   before the start       refuse: commits between W and the start are not
///                                           in the feed
/// at the start       none                   ship (registered, nothing acknowledged yet)
/// past the start     none                   refuse: shipped elsewhere (another head office,
///                                           another till id) or PostgreSQL restored from
///                                           before the first shipment
/// P, at or behind W  W                      ship, skipping up to W
/// P, ahead of W      W                      refuse: PostgreSQL lost shipped transactions
///                                           (restored from an older backup)
/// ```
pub fn decide(p: &Positions, names: &Names<'_>) -> Result<(), Failure> {
    let Names { till_id, consumer } = names;
    let what_to_do = "Nothing was changed, in the till or in PostgreSQL. If --to and --till-id \
                      (default: the host name) are right, stop the till's application and run \
                      `till ship --resync` to ship the till's whole current state.";
    if let Some(reason) = &p.dropped {
        return Err(refused(&format!(
            "this till's feed consumer {consumer:?} (at lsn {}) was dropped ({reason}): the \
             till reused log it had not shipped; PostgreSQL's watermark for till {till_id}: \
             {}. {what_to_do}",
            p.consumer.map_or("none".to_owned(), |c| c.0.to_string()),
            p.watermark
                .map_or("none".to_owned(), |w| format!("lsn {}", w.0))
        )));
    }
    if let (Some(w), Some(durable)) = (p.watermark, p.durable)
        && w > durable
    {
        // Everything shipped was durable in the till when read, and a reopened till
        // publishes its log's end: a watermark past it came from elsewhere.
        return Err(refused(&format!(
            "PostgreSQL's watermark for till {till_id} is lsn {}, past the end of this \
             till's durable log (lsn {}): PostgreSQL holds transactions this till never \
             made. Another till ships as {till_id} (two machines with one host name?), or \
             this till's database was restored from an older copy (after a power cut, open \
             the till first: it publishes its log's end when it opens). Shipping on would \
             skip this till's transactions up to lsn {}. {what_to_do}",
            w.0, durable.0, w.0
        )));
    }
    match (p.consumer, p.watermark) {
        (None, None) => Ok(()),
        (None, Some(w)) if w >= p.start => Ok(()),
        (None, Some(w)) => Err(refused(&format!(
            "PostgreSQL's watermark for till {till_id} is lsn {}, before the start of this \
             till's feed (lsn {}), and the till has no consumer {consumer:?}: the commits \
             between them are not in the feed. {what_to_do}",
            w.0, p.start.0
        ))),
        (Some(position), None) if position <= p.start => Ok(()),
        (Some(position), None) => Err(refused(&format!(
            "PostgreSQL holds no watermark for till {till_id}, but this till's feed consumer \
             {consumer:?} acknowledged up to lsn {} (the feed starts at lsn {}): what came \
             before went to another head office, under another till id, or to this \
             PostgreSQL before it was restored. {what_to_do}",
            position.0, p.start.0
        ))),
        (Some(position), Some(w)) if position <= w => Ok(()),
        (Some(position), Some(w)) => Err(refused(&format!(
            "PostgreSQL's watermark for till {till_id} is lsn {}, behind lsn {} that this \
             till's feed consumer {consumer:?} acknowledged: PostgreSQL lost shipped \
             transactions (restored from an older backup?), or another till ships as \
             {till_id}. {what_to_do}",
            w.0, position.0
        ))),
    }
}

fn refused(message: &str) -> Failure {
    Failure::new(Exit::Refused, format!("refused: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the table, and the boundaries between rows.
    #[test]
    fn every_combination_of_positions_ships_or_refuses_as_the_table_says() {
        let names = Names {
            till_id: "t",
            consumer: "ship",
        };
        let start = Lsn(100);
        let durable = Lsn(1000);
        let cases: &[(Option<u64>, Option<u64>, bool, bool)] = &[
            // consumer, watermark, dropped, ships
            (None, None, false, true),
            (None, Some(100), false, true),
            (None, Some(500), false, true),
            (None, Some(99), false, false),
            (Some(100), None, false, true),
            (Some(101), None, false, false),
            (Some(300), Some(300), false, true),
            (Some(300), Some(400), false, true),
            (Some(300), Some(299), false, false),
            (Some(100), Some(100), true, false),
            (None, None, true, false),
            (Some(300), Some(1000), false, true),
            (Some(300), Some(1001), false, false),
            (None, Some(1001), false, false),
        ];
        for &(consumer, watermark, dropped, ships) in cases {
            let p = Positions {
                start,
                consumer: consumer.map(Lsn),
                dropped: dropped.then(|| "too far behind".to_owned()),
                durable: Some(durable),
                watermark: watermark.map(Lsn),
            };
            let decision = decide(&p, &names);
            assert_eq!(decision.is_ok(), ships, "{p:?}: {decision:?}");
            if let Err(f) = decision {
                assert_eq!(f.exit, Exit::Refused);
                assert!(f.message.contains("Nothing was changed"), "{}", f.message);
                assert!(f.message.contains("--resync"), "{}", f.message);
                // Both positions that disagree: the till's log end for a watermark past it,
                // else the consumer's.
                let till_side = if watermark.is_some_and(|w| w > durable.0) {
                    Some(durable.0)
                } else {
                    consumer
                };
                for lsn in till_side.iter().chain(watermark.iter()) {
                    assert!(f.message.contains(&lsn.to_string()), "{}", f.message);
                }
            }
        }
    }
}
