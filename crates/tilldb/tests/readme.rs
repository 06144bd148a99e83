//! The README's Rust example runs as a doctest (`ReadmeDoctests` in lib.rs), but only while
//! the Markdown around it is well formed: an edit once glued text to a closing fence, the
//! fences stopped pairing, rustdoc no longer saw the example as code, and the doctest vanished
//! without a failure. This test fails instead.

#[test]
fn the_readme_example_stays_a_doctest_because_every_fence_pairs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).expect("README.md");
    let mut open: Option<(usize, String)> = None;
    let mut rust_blocks = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("```") else {
            continue;
        };
        match open.take() {
            None => open = Some((n + 1, rest.to_owned())),
            Some((start, lang)) => {
                assert!(
                    rest.trim().is_empty(),
                    "README.md:{}: a closing fence with text after it: {line:?}",
                    n + 1
                );
                if lang == "rust" {
                    rust_blocks.push(start);
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "README.md: the fence at line {open:?} never closes"
    );
    assert_eq!(rust_blocks.len(), 1, "one Rust example, at {rust_blocks:?}");
}
