//! What readers see: the versions a commit hid from older snapshots (`overlay.rs`) and the
//! order in which commits become visible (`visibility.rs`). Write sets and a commit's redo
//! record live with the database (`db/txn/`, `record.rs`).

pub mod buffer;
pub mod overlay;
pub mod packed;
pub mod visibility;

pub use overlay::{Overlay, Seen, TableId};
pub use visibility::Visibility;
