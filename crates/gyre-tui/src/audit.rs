//! The audit on screen: the engine's audit of the batch's `trained` samples (worked out by a
//! worker, like the lens), and the selected execution's samples laid on its tree with each
//! token's verdict ([`ExecAudit`]), which the `audit` and `gap` colourings, the why line, the
//! highlighted sample and the audit view read. Nothing here judges a token: the engine's
//! `audit` module does.

use std::sync::Arc;

use gyre_engine::audit::verdict::TokenAudit;
use gyre_engine::audit::{self, Audit, Layout, Options, Turns};
use gyre_engine::load::Batch;
use gyre_text::TokenText;
use gyre_text::turns::ChatMl;

/// The audit of one batch.
#[derive(Debug)]
pub struct Audited {
    /// The batch it was made on.
    pub batch: Arc<Batch>,
    /// What the engine found.
    pub audit: Audit,
}

impl Audited {
    /// Audits `batch` with the default bounds, and the tokenizer's turn structure when `text`
    /// has a ChatML template's markers.
    pub fn compute(batch: Arc<Batch>, text: &TokenText) -> Audited {
        let turns = ChatMl::new(text).map(ChatTurns);
        let audit = audit::audit(
            &batch,
            &Options::default(),
            turns.as_ref().map(|t| t as &dyn Turns),
        );
        Audited { batch, audit }
    }
}

/// Whether `batch` holds any `trained` sample (without one there is nothing to audit).
pub fn has_samples(batch: &Batch) -> bool {
    batch.executions.iter().any(|e| !e.trained.list.is_empty())
}

/// A ChatML turn structure, as the audit's [`Turns`].
struct ChatTurns(ChatMl);

impl Turns for ChatTurns {
    fn assistant(&self, tokens: &[u32]) -> Vec<Option<bool>> {
        self.0.assistant(tokens)
    }
}

/// The selected execution's samples on its tree, with the audit's word on each token.
#[derive(Debug)]
pub struct ExecAudit {
    /// The execution (index into the batch).
    pub exec: usize,
    /// The batch generation it was made for (`Selection::batch`).
    pub batch: u64,
    /// Its samples laid on its tree.
    pub layout: Layout,
    /// Each tree token's verdict, gap and finding.
    pub tokens: TokenAudit,
    /// The highlighted sample and, per tree key, [`IN_SAMPLE`] or [`TRAINED_BY_SAMPLE`] (0:
    /// not in it).
    pub sample: Option<(u32, Vec<u8>)>,
}

/// The highlighted sample holds the token, mask off.
pub const IN_SAMPLE: u8 = 1;
/// The highlighted sample trains the token (mask on).
pub const TRAINED_BY_SAMPLE: u8 = 2;

impl ExecAudit {
    /// Execution `exec` of `a`'s batch, made for batch generation `batch`.
    pub fn of(a: &Audited, exec: usize, batch: u64) -> ExecAudit {
        let e = &a.batch.executions[exec];
        let layout = Layout::of(e);
        let tokens = TokenAudit::of(&a.audit, e, exec as u32, &layout);
        ExecAudit {
            exec,
            batch,
            layout,
            tokens,
            sample: None,
        }
    }

    /// Highlights sample `s` (`None`: none): which tree tokens it holds and trains.
    pub fn highlight(&mut self, batch: &Batch, s: Option<u32>) {
        if self.sample.as_ref().map(|(k, _)| *k) == s {
            return;
        }
        self.sample = s.and_then(|s| {
            let keys = &self.layout.samples.get(s as usize)?.keys;
            let exec = &batch.executions[self.exec];
            let mut marks = vec![0u8; self.layout.tree_len as usize];
            for (p, &k) in keys.iter().enumerate() {
                if k < self.layout.tree_len {
                    marks[k as usize] = if Layout::mask_on(exec, s as usize, p) {
                        TRAINED_BY_SAMPLE
                    } else {
                        IN_SAMPLE
                    };
                }
            }
            Some((s, marks))
        });
    }

    /// How the highlighted sample holds tree key `key` (0 when none is highlighted or it does
    /// not hold it).
    pub fn in_sample(&self, key: u32) -> Option<u8> {
        let (_, marks) = self.sample.as_ref()?;
        Some(marks.get(key as usize).copied().unwrap_or(0))
    }
}
