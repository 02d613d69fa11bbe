//! The token pane's windowed layout agrees with laying out the whole path from the start.

use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_text::TokenText;
use gyre_tui::path::{ANCHOR, Layout, PathIndex, RowStart};
use proptest::prelude::*;

fn recording(ids: &[u32]) -> Vec<u8> {
    let n = ids.len();
    let (input, output) = ids.split_at(n / 2);
    let join = |v: &[u32]| {
        v.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{{\"kind\":\"request\",\"execution\":\"e\",\"id\":\"r\",\"input\":[{}],\"output\":[{}],\"logprobs\":[{}]}}\n",
        join(input),
        join(output),
        vec!["-0.5"; output.len()].join(",")
    )
    .into_bytes()
}

/// Token text with newlines in various places, wide characters and empty tokens.
fn text() -> TokenText {
    TokenText::from_vocab(
        (0..40)
            .map(|id| match id % 9 {
                0 => "\n".into(),
                1 => "ab\ncd".into(),
                2 => "漢字".into(),
                3 => String::new(),
                4 => "\n\n".into(),
                _ => format!("w{id}"),
            })
            .collect(),
    )
}

fn check(ids: Vec<u32>, width: u16, stride: usize) {
    let batch = load_bytes("t.jsonl", &recording(&ids), &LoadOptions::default()).unwrap();
    let exec = &batch.executions[0];
    let path = PathIndex::new(exec, 0);
    let t = text();
    let mut l = Layout::new(exec, &path, &t, width);
    // Reference: every row from the top.
    let all = l.rows(RowStart::default(), usize::MAX, true);
    let starts: Vec<RowStart> = all.iter().map(|r| r.start).collect();
    // Rows never cross an anchor.
    for r in &all {
        if let (Some(a), Some(b)) = (r.cells.first(), r.cells.last()) {
            assert!(a.pos / ANCHOR == b.pos / ANCHOR || b.pos % ANCHOR == 0);
        }
    }
    // A token is never split over rows unless it holds a newline or is wider than a row.
    for (i, r) in all.iter().enumerate() {
        if let (Some(last), Some(next)) =
            (r.cells.last(), all.get(i + 1).and_then(|n| n.cells.first()))
        {
            if last.pos == next.pos {
                let glyphs = l.glyphs(last.pos).to_vec();
                let w: u32 = glyphs.iter().map(|g| g.width as u32).sum();
                assert!(
                    glyphs.iter().any(|g| g.brk) || w > width as u32,
                    "token {} split over rows at width {width}",
                    last.pos
                );
            }
        }
    }
    // Walking up from the last row visits every row start in reverse.
    let mut cur = *starts.last().unwrap();
    for want in starts.iter().rev().skip(1).take(3000 / stride.max(1) + 200) {
        cur = l.prev_row(cur);
        assert_eq!(cur, *want);
    }
    // row_of(pos) is the row holding the token's first glyph.
    for pos in (0..path.len).step_by(stride) {
        let row = all
            .iter()
            .find(|r| r.cells.iter().any(|c| c.pos == pos))
            .map(|r| r.start)
            .unwrap();
        assert_eq!(l.row_of(pos), row, "pos {pos}");
    }
    // Moving down then up by k rows returns.
    for k in [1i64, 3, 17] {
        let mid = starts[starts.len() / 2];
        let down = l.move_rows(mid, k);
        let i = starts.iter().position(|s| *s == mid).unwrap();
        let j = (i + k as usize).min(starts.len() - 1);
        assert_eq!(down, starts[j]);
        assert_eq!(l.move_rows(down, -k), starts[j.saturating_sub(k as usize)]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    #[test]
    fn windowed_layout_matches_full_layout(ids in prop::collection::vec(0u32..40, 2..300), width in 4u16..30) {
        check(ids, width, 1);
    }
}

#[test]
fn long_path_without_newlines_crosses_anchors() {
    let ids: Vec<u32> = (0..(ANCHOR as u32 * 2 + 100))
        .map(|i| 5 + (i % 3))
        .collect();
    check(ids, 37, 211);
}
