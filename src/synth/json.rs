//! A minimal JSON-lines writer for records: ids and fixed-point numbers through `itoa`, strings
//! through serde_json's escaper. One line is built in a buffer, then written whole.

use std::io::Write;

use color_eyre::eyre::{Result, WrapErr};

pub(crate) struct Lines<'w> {
    out: &'w mut dyn Write,
    pub buf: Vec<u8>,
    pub bytes: u64,
    pub lines: u64,
    ints: itoa::Buffer,
}

impl<'w> Lines<'w> {
    pub(crate) fn new(out: &'w mut dyn Write) -> Self {
        Self {
            out,
            buf: Vec::with_capacity(1 << 16),
            bytes: 0,
            lines: 0,
            ints: itoa::Buffer::new(),
        }
    }

    /// Ends the current line and writes it.
    pub(crate) fn end_line(&mut self) -> Result<()> {
        self.buf.push(b'\n');
        self.out
            .write_all(&self.buf)
            .wrap_err("writing synth output")?;
        self.bytes += self.buf.len() as u64;
        self.lines += 1;
        self.buf.clear();
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.out.flush().wrap_err("writing synth output")
    }

    /// `"key":` preceded by a comma unless it opens the object.
    pub(crate) fn key(&mut self, key: &str) {
        if !matches!(self.buf.last(), Some(b'{') | None) {
            self.buf.push(b',');
        }
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// A JSON string (escaped).
    pub(crate) fn str(&mut self, s: &str) {
        // Writing into a Vec cannot fail and a &str always serialises.
        let _ = serde_json::to_writer(&mut self.buf, s);
    }

    pub(crate) fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn uint(&mut self, v: u64) {
        self.buf.extend_from_slice(self.ints.format(v).as_bytes());
    }

    /// `units / 10^decimals` with exactly `decimals` digits, negated when `negative`.
    pub(crate) fn fixed(&mut self, units: u64, decimals: u32, negative: bool) {
        let scale = 10u64.pow(decimals);
        if negative {
            self.buf.push(b'-');
        }
        self.uint(units / scale);
        self.buf.push(b'.');
        let frac = units % scale;
        let digits = self.ints.format(frac).len() as u32;
        for _ in digits..decimals {
            self.buf.push(b'0');
        }
        self.buf
            .extend_from_slice(self.ints.format(frac).as_bytes());
    }

    pub(crate) fn ids(&mut self, ids: &[u32]) {
        self.buf.push(b'[');
        for (i, &id) in ids.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.buf.extend_from_slice(self.ints.format(id).as_bytes());
        }
        self.buf.push(b']');
    }
}
