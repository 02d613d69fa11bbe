//! Reading successive full-form inputs of one conversation: each repeats the previous one's
//! bytes, so the shared bytes are compared instead of parsed and only the rest is read.

use crate::record::{ArrayAt, read_ids};

/// Reads token arrays as the fast path does (see [`crate::record::split_token_arrays`]),
/// remembering the last one it read: an array that starts with the same bytes takes that
/// one's tokens for them (one byte comparison) and parses only the rest. Bytes written in any
/// other form (spaces, `1e2`, `-0`, leading zeros, …) simply do not match and are read in full.
#[derive(Debug, Default)]
pub struct PrefixReader {
    /// The last array's bytes between its brackets.
    raw: Vec<u8>,
    /// Its tokens.
    ids: Vec<u32>,
}

impl PrefixReader {
    /// Reads `array`: a token array's bytes after its `[`, ending at its `]` (the first one),
    /// into `into` (emptied first; a spent input's allocation, or `Vec::new()`). `None` where
    /// the fast path declines (not a plain array of canonical ids below 2^32, or not ending at
    /// the `]`); the reader then forgets what it held.
    pub fn read(&mut self, array: &[u8], mut into: Vec<u32>) -> Option<Vec<u32>> {
        let (&b']', content) = array.split_last()? else {
            return None;
        };
        let same = common_prefix(&self.raw, content);
        // Take the tokens the shared bytes hold whole: all of the last array's when the new
        // bytes go on past its last element (`1,2,3` then `1,2,3,4`; not `1,2,34`), else those
        // before the last comma shared.
        let (cut, known, at) = if same == self.raw.len()
            && !self.ids.is_empty()
            && !content.get(same).is_some_and(u8::is_ascii_digit)
        {
            (same, self.ids.len(), ArrayAt::Element)
        } else {
            match memchr::memrchr(b',', &content[..same]) {
                Some(comma) => {
                    let known = memchr::memchr_iter(b',', &content[..comma]).count() + 1;
                    (comma + 1, known, ArrayAt::Comma)
                }
                None => (0, 0, ArrayAt::Start),
            }
        };
        self.ids.truncate(known);
        self.raw.truncate(cut);
        match read_ids(array, cut, at, &mut self.ids) {
            Some(close) if close + 1 == array.len() => {
                self.raw.extend_from_slice(&content[cut..]);
                into.clear();
                into.extend_from_slice(&self.ids);
                Some(into)
            }
            _ => {
                self.ids.clear();
                self.raw.clear();
                None
            }
        }
    }
}

/// Length of the longest common prefix of `a` and `b`, compared in 256-byte blocks (memcmp)
/// up to the first that differs.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    for (x, y) in a.chunks_exact(256).zip(b.chunks_exact(256)) {
        if x != y {
            break;
        }
        i += 256;
    }
    i + a[i..]
        .iter()
        .zip(&b[i..])
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::PrefixReader;
    use crate::record::{
        ArrayAt, LineError, LineParse, Parsed, parse_line, parse_line_deferred, read_ids,
    };
    use proptest::prelude::*;

    /// The exact path: the array read from its `[`, with nothing remembered.
    fn from_scratch(array: &[u8]) -> Option<Vec<u32>> {
        let mut line = b"[".to_vec();
        line.extend_from_slice(array);
        let mut ids = Vec::new();
        let close = read_ids(&line, 1, ArrayAt::Start, &mut ids)?;
        (close + 1 == line.len()).then_some(ids)
    }

    /// One element as text: mostly canonical, sometimes spelled otherwise (some of those are
    /// the same number in JSON, none is a canonical id).
    fn element() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => (0u32..40).prop_map(|n| n.to_string()),
            2 => any::<u32>().prop_map(|n| n.to_string()),
            1 => (0u32..40).prop_map(|n| format!("0{n}")),
            1 => (0u32..40).prop_map(|n| format!("{n}e0")),
            1 => (0u32..40).prop_map(|n| format!("{n}.0")),
            1 => Just("-0".to_owned()),
            1 => Just("4294967296".to_owned()),
            1 => Just("12345678901".to_owned()),
            1 => Just("\"7\"".to_owned()),
            1 => Just(String::new()),
        ]
    }

    /// Successive arrays of one conversation. Each keeps a prefix of the previous one's
    /// elements (usually all of them) and goes on with others, separated by `,` with or
    /// without spaces, sometimes with a trailing comma or no `]`; or it keeps any prefix of
    /// the previous one's bytes (`1,2,3` → `1,2,3` + `4,5`) and goes on with digits,
    /// separators and other number characters.
    fn conversation() -> impl Strategy<Value = Vec<String>> {
        let step = (
            0.0..1.0f64,
            prop::collection::vec(element(), 0..6),
            prop_oneof![6 => Just(","), 1 => Just(", "), 1 => Just(" ,")],
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.03),
            prop::option::weighted(0.3, "[0-9, e.-]{0,6}"),
        );
        prop::collection::vec(step, 1..12).prop_map(|steps| {
            let mut elements: Vec<String> = Vec::new();
            let mut arrays: Vec<String> = Vec::new();
            for (keep, more, sep, trailing, unclosed, bytes) in steps {
                if let Some(tail) = bytes {
                    let last = arrays.last().map_or("", |a| a.trim_end_matches(']'));
                    let cut = if keep < 0.5 {
                        last.len()
                    } else {
                        (last.len() as f64 * (keep - 0.5) * 2.0) as usize
                    };
                    let mut text = last[..cut].to_owned();
                    text.push_str(&tail);
                    text.push(']');
                    arrays.push(text);
                    continue;
                }
                let kept = if keep < 0.6 {
                    elements.len()
                } else {
                    (elements.len() as f64 * keep) as usize
                };
                elements.truncate(kept);
                elements.extend(more);
                let mut text = elements.join(sep);
                if trailing {
                    text.push(',');
                }
                if !unclosed {
                    text.push(']');
                }
                arrays.push(text);
            }
            arrays
        })
    }

    /// A result as text, to compare the two paths' records, warnings and errors.
    fn shown(r: Result<Parsed, LineError>) -> String {
        match r {
            Ok(p) => format!("{:?} {:?}", p.record, p.warnings),
            Err(e) => format!("{e:?}"),
        }
    }

    /// A record line around each array: mostly a full-form request (spans that may run past
    /// the input, an unknown source, a repeated key), sometimes a delta one or another kind.
    fn lines() -> impl Strategy<Value = Vec<String>> {
        let shape = (
            prop_oneof![6 => Just("request"), 1 => Just("closure"), 1 => Just("nonsense")],
            prop::bool::weighted(0.1),
            prop::collection::vec((0u64..4, prop::bool::weighted(0.1)), 0..3),
            prop::bool::weighted(0.03),
        );
        (conversation(), prop::collection::vec(shape, 12)).prop_map(|(arrays, shapes)| {
            arrays
                .iter()
                .zip(shapes)
                .enumerate()
                .map(|(i, (array, (kind, extends, spans, repeat)))| {
                    let mut end = 0;
                    let spans: Vec<String> = spans
                        .iter()
                        .map(|&(step, odd)| {
                            end += step;
                            let source = if odd { "nope" } else { "tool" };
                            format!("{{\"end\":{end},\"source\":\"{source}\"}}")
                        })
                        .collect();
                    let extends = if extends { ",\"extends\":\"r0\"" } else { "" };
                    let repeat = if repeat { ",\"input\":[1]" } else { "" };
                    format!(
                        "{{\"kind\":\"{kind}\",\"execution\":\"e\",\"id\":\"r{i}\",\
                         \"t\":1,\"status\":\"completed\",\"input\":[{array}{extends},\
                         \"output\":[5,6],\"logprobs\":[-0.5,-1e-3],\"spans\":[{}]{repeat}}}",
                        spans.join(",")
                    )
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// A conversation's lines read through the deferring path and one reader give what
        /// [`parse_line`] gives for each line on its own.
        #[test]
        fn deferred_inputs_read_as_the_exact_path_does(lines in lines()) {
            let mut r = PrefixReader::default();
            for line in &lines {
                let line = line.as_bytes();
                let got = match parse_line_deferred(line) {
                    LineParse::Read(result) => result,
                    LineParse::Deferred(d) => {
                        let ids = r.read(d.input(line), Vec::new());
                        d.finish(line, ids)
                    }
                };
                prop_assert_eq!(
                    shown(got),
                    shown(parse_line(line)),
                    "{}",
                    String::from_utf8_lossy(line)
                );
            }
        }

        /// Whatever was read before, an array reads as it does from scratch.
        #[test]
        fn remembered_bytes_never_change_what_an_array_says(arrays in conversation()) {
            let mut r = PrefixReader::default();
            for a in &arrays {
                prop_assert_eq!(r.read(a.as_bytes(), vec![9; 3]), from_scratch(a.as_bytes()), "{}", a);
            }
        }
    }

    fn read(r: &mut PrefixReader, array: &str) -> Option<Vec<u32>> {
        r.read(array.as_bytes(), Vec::new())
    }

    #[test]
    fn shared_bytes_end_at_a_token_boundary() {
        let mut r = PrefixReader::default();
        assert_eq!(read(&mut r, "1,2,3]"), Some(vec![1, 2, 3]));
        // The shared `1,2,3` must not be taken as the token 3.
        assert_eq!(read(&mut r, "1,2,34]"), Some(vec![1, 2, 34]));
        assert_eq!(read(&mut r, "1,2,34,5]"), Some(vec![1, 2, 34, 5]));
        assert_eq!(read(&mut r, "1,2,3]"), Some(vec![1, 2, 3]));
        assert_eq!(read(&mut r, "10,2]"), Some(vec![10, 2]));
        assert_eq!(read(&mut r, "1]"), Some(vec![1]));
        assert_eq!(read(&mut r, "]"), Some(vec![]));
        assert_eq!(read(&mut r, " ]"), Some(vec![]));
        assert_eq!(read(&mut r, " 7 , 8 ]"), Some(vec![7, 8]));
        assert_eq!(read(&mut r, " 7 , 8 9]"), None);
    }

    #[test]
    fn other_spellings_are_declined_as_the_fast_path_does() {
        let mut r = PrefixReader::default();
        assert_eq!(read(&mut r, "1,2,3]"), Some(vec![1, 2, 3]));
        for bad in [
            "1,2,3e2]",
            "1,2,3.0]",
            "1,2,03]",
            "1,2,-0]",
            "1,2,3,]",
            "1,2,3,4294967296]",
            "1,2,3,12345678901]",
            "1,2,3",
            "1,2,\"3\"]",
        ] {
            assert_eq!(read(&mut r, bad), None, "{bad}");
            assert_eq!(read(&mut r, "1,2,3]"), Some(vec![1, 2, 3]));
        }
        assert_eq!(
            read(&mut r, "1,2,3,4294967295]"),
            Some(vec![1, 2, 3, u32::MAX])
        );
    }
}
