//! Log timestamps (RFC 3339 / ISO 8601) as Unix seconds.

/// Seconds since the Unix epoch of an RFC 3339 / ISO 8601 timestamp
/// (`2026-02-10T21:11:56.906Z`, `2025-01-27T22:44:56.900854`, `…+02:00`, `…+0200`); no zone =
/// UTC. Anything else (including non-ASCII bytes anywhere) is `None`, never a panic.
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(r)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(
            digits
                .iter()
                .fold(0i64, |n, &d| n * 10 + i64::from(d - b'0')),
        )
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix(b".") {
        let n = r.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        // Digits only: the slice is ASCII, so this is a valid str.
        frac = std::str::from_utf8(&r[..n])
            .ok()
            .and_then(|digits| format!("0.{digits}").parse().ok())?;
        rest = &r[n..];
    }
    let offset = match rest {
        b"" | b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), tail @ ..] => {
            let (oh, om) = match tail {
                [a, b, b':', c, d] | [a, b, c, d] => (num_of(&[*a, *b])?, num_of(&[*c, *d])?),
                [a, b] => (num_of(&[*a, *b])?, 0),
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            let sign = if *sign == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset;
    Some(secs as f64 + frac)
}

fn num_of(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            parse_timestamp("2026-02-10T21:11:56.906Z"),
            Some(1_770_757_916.906)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T22:44:56.900854"),
            Some(1_738_017_896.900854)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T23:44:56+01:00"),
            Some(1_738_017_896.0)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T23:44:56+0100"),
            Some(1_738_017_896.0)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn hostile_timestamps_are_none_not_a_panic() {
        for s in [
            "2026-02-10T21:11:56+0é00",
            "2026-02-10T21:11:56+é",
            "2026-02-10T21:11:5é",
            "é026-02-10T21:11:56Z",
            "2026-02-10T21:11:56.é",
            "2026-02-10T21:11:56.",
            "2026-02-10T21:11:56+01:0",
            "2026-13-10T21:11:56Z",
            "2026-02-10T21:11:56Zjunk",
            "2026-02-10T21:11:56+99:00",
            "",
        ] {
            assert_eq!(parse_timestamp(s), None, "{s:?}");
        }
        // Every prefix and every byte-boundary cut of a valid stamp with a multibyte tail.
        let s = "2026-02-10T21:11:56.906+01:00ééé";
        for (i, _) in s.char_indices() {
            let _ = parse_timestamp(&s[..i]);
            let _ = parse_timestamp(&s[i..]);
        }
    }
}
