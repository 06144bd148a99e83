//! Transactions: what readers see (`overlay.rs`, `visibility.rs`), and later write sets,
//! commit ordering and the redo records of a commit.

pub mod overlay;
pub mod visibility;

pub use overlay::{Overlay, Seen, TableId};
pub use visibility::Visibility;
