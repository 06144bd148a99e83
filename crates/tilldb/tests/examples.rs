//! The examples in `crates/tilldb/examples/` run as tests, so that they stay true.

#[path = "../examples/till_sales.rs"]
mod till_sales;

#[test]
fn the_till_sales_example_records_every_sale_and_the_total_matches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let total = till_sales::run(&dir.path().join("till"), 100).expect("the example runs");
    // Sales n = 1..=100 cost (n % 7 + 1) x 250 cents.
    let expected: u64 = (1..=100u64).map(|n| (n % 7 + 1) * 250).sum();
    assert_eq!(total, expected);
}

#[path = "../examples/price_list.rs"]
mod price_list;

#[test]
fn the_price_list_example_imports_every_row_in_one_transaction_of_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The test options' 64 KiB parts and 64-page cache: 5,000 rows make many parts and spill.
    let import = price_list::run(
        &dir.path().join("till"),
        5_000,
        tilldb::Options::for_tests(),
    )
    .expect("the example runs");
    assert_eq!(import.rows, 5_000);
    assert!(import.parts > 2, "{import:?}");
    assert!(import.spilled_pages > 0, "{import:?}");
}

#[path = "../examples/receipt_queue.rs"]
mod receipt_queue;

#[test]
fn the_receipt_queue_example_takes_every_receipt_in_order_from_the_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = receipt_queue::run(
        &dir.path().join("till"),
        3_000,
        1_000,
        10,
        tilldb::Options::for_tests(),
    )
    .expect("the example runs");
    assert_eq!((queue.popped, queue.left), (1_000, 2_000), "{queue:?}");
}
