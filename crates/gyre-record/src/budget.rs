//! The memory budget shared by concurrent requests (docs/record.md, "Memory"): before a body is
//! read, a request reserves what parsing, rendering and tokenising it can cost at most, waits
//! (first come, first served) while the budget is spent, and is answered 503 with `Retry-After`
//! when it cannot get it within the read timeout; a body that would cost more than the whole
//! budget is a 413. A body without a `content-length` reserves as it arrives. When a large
//! reservation ends, the allocator is asked to return free memory to the OS.
//!
//! The cost of a body of `n` bytes is bounded by [`PARSE_FACTOR`] × `n` (the JSON tree, the
//! conversation, the rendered text: the worst shape measured is many small messages) plus
//! [`TOKENISE_FACTOR`] × the text that can reach the tokenizer (at most `n`, and no more than a
//! context can hold when the conversation is refused before tokenising past it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::chat::{ApiError, ErrorKind};

/// Bytes of memory per byte of body for parsing and rendering (JSON tree, conversation,
/// template values, rendered text): the worst shape measured, tool-call arguments of many small
/// fields, peaks at 33× (benches/record_memory.rs), plus a margin.
pub const PARSE_FACTOR: usize = 40;

/// Bytes of memory per byte of text tokenised (docs/record.md: ~100, with a margin).
pub const TOKENISE_FACTOR: usize = 128;

/// A reservation this large (KiB) returns free memory to the OS when it ends.
const TRIM_KIB: usize = 64 << 10;

/// The budget, in KiB.
pub struct Budget {
    sem: Arc<Semaphore>,
    total_kib: usize,
    /// Returns free heap memory to the OS (the binary's allocator knows how).
    release: Option<fn()>,
    trimming: Arc<AtomicBool>,
}

/// Part of the budget held by one request; given back when dropped.
pub struct Held {
    permit: Option<OwnedSemaphorePermit>,
    kib: usize,
    release: Option<fn()>,
    trimming: Arc<AtomicBool>,
}

impl Budget {
    /// A budget of `bytes`, with `release` to give memory back after large requests.
    pub fn new(bytes: usize, release: Option<fn()>) -> Budget {
        let total_kib = (bytes >> 10).clamp(1, u32::MAX as usize);
        Budget {
            sem: Arc::new(Semaphore::new(total_kib)),
            total_kib,
            release,
            trimming: Arc::new(AtomicBool::new(false)),
        }
    }

    /// An empty reservation, grown with [`reserve`](Self::reserve).
    pub fn none(&self) -> Held {
        Held {
            permit: None,
            kib: 0,
            release: self.release,
            trimming: Arc::clone(&self.trimming),
        }
    }

    /// Grows `held` to `bytes`, waiting up to `wait` for the budget to have it: a 413 when the
    /// whole budget is smaller, a 503 (retry) when it is not free in time.
    pub async fn reserve(
        &self,
        held: &mut Held,
        bytes: usize,
        wait: Duration,
    ) -> Result<(), ApiError> {
        let kib = bytes.div_ceil(1 << 10);
        if kib <= held.kib {
            return Ok(());
        }
        if kib > self.total_kib {
            return Err(ApiError::new(
                ErrorKind::TooLarge,
                format!(
                    "this request may need {} MiB of memory to parse, render and tokenise; gyre \
                     record's budget for all requests together is {} MiB (--max-memory-mb); \
                     nothing was recorded",
                    kib >> 10,
                    self.total_kib >> 10
                ),
            ));
        }
        let more = u32::try_from(kib - held.kib).unwrap_or(u32::MAX);
        let permit = tokio::time::timeout(wait, Arc::clone(&self.sem).acquire_many_owned(more))
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "gyre record's memory budget ({} MiB, --max-memory-mb) is taken by \
                         requests in progress; retry",
                        self.total_kib >> 10
                    ),
                )
            })?;
        match &mut held.permit {
            Some(p) => p.merge(permit),
            None => held.permit = Some(permit),
        }
        held.kib = kib;
        Ok(())
    }
}

/// What a body of `body` bytes may cost, when at most `text_cap` bytes of its text can be
/// tokenised.
pub fn cost(body: usize, text_cap: usize) -> usize {
    body.saturating_mul(PARSE_FACTOR)
        .saturating_add(body.min(text_cap).saturating_mul(TOKENISE_FACTOR))
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.permit.take());
        let Some(release) = self.release else {
            return;
        };
        // One trim at a time, off the async workers (it walks the heap).
        if self.kib >= TRIM_KIB && !self.trimming.swap(true, Ordering::SeqCst) {
            let trimming = Arc::clone(&self.trimming);
            let trim = move || {
                release();
                trimming.store(false, Ordering::SeqCst);
            };
            match tokio::runtime::Handle::try_current() {
                Ok(h) => {
                    h.spawn_blocking(trim);
                }
                Err(_) => trim(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reservation_waits_for_the_budget_and_one_past_it_is_refused() {
        let budget = Budget::new(10 << 20, None);
        let mut a = budget.none();
        budget
            .reserve(&mut a, 8 << 20, Duration::from_millis(10))
            .await
            .unwrap();
        let mut b = budget.none();
        let e = budget
            .reserve(&mut b, 4 << 20, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(e.kind.status(), 503);
        drop(a);
        budget
            .reserve(&mut b, 4 << 20, Duration::from_millis(10))
            .await
            .unwrap();
        budget
            .reserve(&mut b, 10 << 20, Duration::from_millis(10))
            .await
            .unwrap();
        let e = budget
            .reserve(&mut budget.none(), 11 << 20, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(e.kind.status(), 413);
    }
}
