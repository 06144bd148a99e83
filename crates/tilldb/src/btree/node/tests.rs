//! Unit tests of the slotted node layout.

use super::*;
use crate::btree::Limits;
use crate::btree::node_mut::build;

fn limits() -> Limits {
    Limits::new(4096)
}

fn leaf_cell(key: &[u8], value: &[u8]) -> Vec<u8> {
    encode_leaf_cell(key, &LeafValue::Inline(value.to_vec()))
}

#[test]
fn zero_body_is_an_empty_node() {
    let body = vec![0; limits().body_bytes];
    for kind in [NodeKind::Leaf, NodeKind::Branch] {
        let node = NodeRef::parse_body(kind, &body).expect("valid");
        assert_eq!(node.count(), 0);
        assert_eq!(node.free_bytes(), limits().usable_bytes);
        assert_eq!(node.search(b"x"), Err(0));
    }
}

#[test]
fn branch_children() {
    let limits = limits();
    let cells = vec![
        encode_branch_cell(b"g", PageId(11)),
        encode_branch_cell(b"p", PageId(12)),
    ];
    let body = build(NodeKind::Branch, &limits, PageId(10), PageId(0), &cells);
    let node = NodeRef::parse_body(NodeKind::Branch, &body).expect("valid");
    assert_eq!(node.leftmost(), PageId(10));
    let children: Vec<u64> = [&b"a"[..], b"g", b"h", b"p", b"z"]
        .iter()
        .map(|key| node.child(node.child_index(key)).0)
        .collect();
    assert_eq!(children, [10, 11, 11, 12, 12]);
}

#[test]
fn overflow_value_cell() {
    let value = LeafValue::Overflow {
        len: 100_000,
        first: PageId(9),
    };
    let cell = encode_leaf_cell(b"key", &value);
    assert_eq!(cell.len(), LEAF_OVERFLOW_CELL_OVERHEAD + 3);
    let body = build(NodeKind::Leaf, &limits(), PageId(0), PageId(0), &[cell]);
    let node = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
    assert_eq!(node.value(0).to_owned(), value);
    assert_eq!(node.value(0).len(), 100_000);
}

#[test]
fn parse_refuses_bad_layouts() {
    let limits = limits();
    let good = build(
        NodeKind::Leaf,
        &limits,
        PageId(0),
        PageId(0),
        &[leaf_cell(b"a", b"1"), leaf_cell(b"b", b"2")],
    );
    let mut bad = good.clone();
    bad[COUNT_OFFSET] = 3; // a slot of zero points into the header
    assert!(NodeRef::parse_body(NodeKind::Leaf, &bad).is_err());
    let mut bad = good.clone();
    bad[DEAD_BYTES_OFFSET] = 1;
    assert!(NodeRef::parse_body(NodeKind::Leaf, &bad).is_err());
    let mut bad = good.clone();
    bad[RESERVED_OFFSET] = 1;
    assert!(NodeRef::parse_body(NodeKind::Leaf, &bad).is_err());
    let mut bad = good.clone();
    bad[CELL_BYTES_OFFSET + 1] = 0xFF;
    assert!(NodeRef::parse_body(NodeKind::Leaf, &bad).is_err());
    // Swapped slots: keys out of order.
    let mut bad = good.clone();
    let slots = NODE_HEADER_BYTES..NODE_HEADER_BYTES + 2 * SLOT_BYTES;
    bad[slots.clone()].rotate_left(SLOT_BYTES);
    assert_eq!(
        NodeRef::parse_body(NodeKind::Leaf, &bad).map(|node| node.count()),
        Err("node keys are not in strictly ascending order")
    );
    // Every single-byte corruption either parses or is refused; none panics.
    for index in 0..good.len() {
        for byte in [0x00, 0x01, 0x80, 0xFF] {
            let mut bad = good.clone();
            bad[index] = byte;
            if let Ok(node) = NodeRef::parse_body(NodeKind::Leaf, &bad) {
                for i in 0..node.count() {
                    let _ = (node.key(i), node.value(i));
                }
            }
        }
    }
}
