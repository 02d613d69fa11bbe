//! Which shard a recording line goes to: its execution's ([`shard_of`]), read from the line's
//! `kind` and `execution` members by a scan that skips token arrays unparsed ([`route`]), with
//! serde_json as the exact fallback. Shared by [`crate::shard::split`] and [`crate::runs::index`].

use std::borrow::Cow;

use serde::Deserialize;

use gyre_format::record::Id;

/// The shard of execution `id` among `shards`: FNV-1a (64-bit) of its UTF-8 bytes, modulo
/// `shards`. Stable across machines, runs and versions.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    (h % shards.max(1) as u64) as u32
}

/// The raw text of a line's `kind` and `execution` values, where present.
type Members<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The raw value text of a recording line's top-level `kind` and `execution` members, found
/// without reading the rest: values before them are skipped by bracket and quote, not parsed,
/// and the scan stops once it has both (gyre's writer puts them first). `None` where the scan
/// cannot tell (an escaped key, broken JSON): the caller then reads the line with serde_json.
///
/// What follows the two members is not checked. That is exact for every line the loader
/// accepts (its keys are unique, so the first `execution` is the only one); a line it refuses
/// (a repeated key further on, broken JSON) only needs to reach exactly one shard, which
/// reports it at its `file:line` as one load would.
fn scan(line: &[u8]) -> Option<Members<'_>> {
    let mut i = skip_ws(line, 0);
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(line, i + 1);
    let (mut kind, mut execution) = (None, None);
    if line.get(i) == Some(&b'}') {
        return Some((None, None));
    }
    loop {
        if line.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(line, i + 1)?;
        let key = &line[i + 1..key_end];
        if key.contains(&b'\\') {
            return None;
        }
        i = skip_ws(line, key_end + 1);
        if line.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(line, i + 1);
        let end = value_end(line, i)?;
        let slot = match key {
            b"kind" => Some(&mut kind),
            b"execution" => Some(&mut execution),
            _ => None,
        };
        if let Some(slot) = slot {
            if slot.replace(&line[i..end]).is_some() {
                return None;
            }
            if kind.is_some() && execution.is_some() {
                return Some((kind, execution));
            }
        }
        i = skip_ws(line, end);
        match line.get(i) {
            Some(b',') => i = skip_ws(line, i + 1),
            Some(b'}') => return Some((kind, execution)),
            _ => return None,
        }
    }
}

fn skip_ws(line: &[u8], mut i: usize) -> usize {
    while line
        .get(i)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        i += 1;
    }
    i
}

/// Index of the quote that closes the string whose text starts at `i`.
fn string_end(line: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[i] == b'"' {
            return Some(i);
        }
        i += 2;
    }
}

/// End (exclusive) of the JSON value starting at `i`.
fn value_end(line: &[u8], i: usize) -> Option<usize> {
    match *line.get(i)? {
        b'"' => Some(string_end(line, i + 1)? + 1),
        b'[' => nested_end(line, i, b'[', b']'),
        b'{' => nested_end(line, i, b'{', b'}'),
        _ => {
            let n = line[i..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(line.len() - i);
            (n > 0).then_some(i + n)
        }
    }
}

/// End of the array or object at `i`: in JSON, brackets (outside strings) balance on their
/// own, so only `open`, `close` and quotes are looked at.
fn nested_end(line: &[u8], mut i: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        i += memchr::memchr3(open, close, b'"', line.get(i..)?)?;
        match line[i] {
            b'"' => i = string_end(line, i + 1)?,
            b if b == open => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        }
        i += 1;
    }
}

/// The two fields that route a line, read by serde_json (the exact path).
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    execution: Option<Id>,
}

/// The shard of one line (`None` for a blank line, which every shard keeps blank): its
/// execution's, or 0 for a header, a line naming no execution and a line that cannot be read.
/// A line the loader accepts always goes to the shard of the execution the loader files it
/// under; one it refuses goes to exactly one shard, which reports it.
pub fn route(line: &[u8], shards: u32) -> Option<u32> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let probe = match scan(line) {
        Some((kind, execution)) => (|| {
            Some(Probe {
                kind: match kind {
                    Some(k) => serde_json::from_slice::<Option<Cow<str>>>(k).ok()?,
                    None => None,
                },
                execution: match execution {
                    Some(e) => serde_json::from_slice::<Option<Id>>(e).ok()?,
                    None => None,
                },
            })
        })(),
        None => serde_json::from_slice::<Probe>(line).ok(),
    };
    Some(match probe {
        Some(Probe {
            kind,
            execution: Some(Id(id)),
        }) if kind.as_deref() != Some("header") => shard_of(&id, shards),
        _ => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_route_is_the_serde_route() {
        let probe = |line: &str, shards| {
            let slow = match serde_json::from_str::<Probe>(line) {
                Ok(Probe {
                    kind,
                    execution: Some(Id(id)),
                }) if kind.as_deref() != Some("header") => shard_of(&id, shards),
                _ => 0,
            };
            (route(line.as_bytes(), shards), Some(slow))
        };
        // Lines the loader refuses need only reach one shard.
        for line in [
            r#"{"kind":"request","execution":"x1","execution":"x2"}"#,
            r#"{"kind":"request","execution":"x5",]"#,
        ] {
            assert!(route(line.as_bytes(), 3).is_some());
        }
        for line in [
            r#"{"kind":"request","execution":"x9","input":[1,[2,3]],"output":[]}"#,
            r#"{ "output" : [1, 2] , "execution" : 12 , "kind" : "closure" }"#,
            r#"{"kind":"header","execution":"x9"}"#,
            r#"{"kind":null,"execution":"x9"}"#,
            r#"{"kind":"request","execution":null}"#,
            r#"{"kind":"request","execution":{"a":1}}"#,
            r#"{"kind":"request","execution":"a\"b\\c"}"#,
            r#"{"kind":"request","execu\u0074ion":"x9"}"#,
            r#"{"kind":"request","kind":"closure","execution":"x1"}"#,
            r#"{"meta":{"execution":"inner"},"kind":"request","execution":"x3"}"#,
            r#"{"meta":"}{][","kind":"request","execution":"x4"}"#,
            r#"{"kind":"request","execution":-3}"#,
            r#"[1,2]"#,
            r#"{}"#,
            "{not json",
        ] {
            for shards in [1, 2, 7] {
                let (fast, slow) = probe(line, shards);
                assert_eq!(fast, slow, "{line}");
            }
        }
        assert_eq!(route(b"  \t", 3), None);
    }
}
