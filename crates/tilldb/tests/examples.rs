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
