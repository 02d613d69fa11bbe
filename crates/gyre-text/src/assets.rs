//! The tokenizer and chat template of the model a user points at (`--tokenizer NAME|DIR|FILE`,
//! `--chat-template FILE`), read the way Hugging Face ships models today.
//!
//! A model directory holds `tokenizer.json` (or `tokenizer.json.gz`) and `tokenizer_config.json`;
//! the chat template is the config's `chat_template`, else `chat_template.jinja` beside it (the
//! layout `transformers` ≥ 4.43 saves), else `chat_template.json`. `--chat-template` overrides
//! all of them (Qwen3-Coder runs on the Qwen3 tokenizer with its own template). The special
//! tokens a template uses (`bos_token`, `eos_token`) come from `tokenizer_config.json` either way.

use std::path::{Path, PathBuf};

use eyre::{Result, WrapErr, bail, eyre};

use super::template::{ChatTemplate, config_template};
use super::tokenizer::{BUNDLED, TokenText, tokenizer_file};

/// Largest chat template or `tokenizer_config.json` read (real ones are 2–60 KB; Llama's
/// config is 54 KB): a stray argument cannot make gyre read a huge file.
const MAX_TEMPLATE_BYTES: u64 = 8 << 20;

/// A model's tokenizer and chat template, and where they came from.
#[derive(Debug)]
pub struct ModelAssets {
    /// The tokenizer.
    pub tokenizer: TokenText,
    /// The chat template conversations are rendered with.
    pub template: ChatTemplate,
    /// The tokenizer file read (canonical), or `None` for a bundled tokenizer.
    pub tokenizer_file: Option<PathBuf>,
    /// Where the template came from: `bundled qwen3`, or a file (with the key inside it).
    pub template_source: String,
}

impl ModelAssets {
    /// Reads `tokenizer` (a bundled name, a model directory, or a `tokenizer.json` / `.gz`
    /// file whose directory holds the rest) and the chat template (`chat_template` when given).
    /// Every error is one line naming the file and what is missing or wrong.
    pub fn load(tokenizer: &str, chat_template: Option<&Path>) -> Result<Self> {
        if BUNDLED.contains(&tokenizer) {
            let tok = TokenText::bundled(tokenizer)?;
            let (template, template_source) = match chat_template {
                Some(file) => (
                    ChatTemplate::with_qwen3_tokens(read_template_file(file)?.0)
                        .wrap_err_with(|| format!("in {}", file.display()))?,
                    file.display().to_string(),
                ),
                None => (ChatTemplate::qwen3()?, format!("bundled {tokenizer}")),
            };
            return Ok(Self {
                tokenizer: tok,
                template,
                tokenizer_file: None,
                template_source,
            });
        }
        let path = Path::new(tokenizer);
        if !path.exists() {
            bail!(
                "{}: no such file or directory (bundled tokenizers: {})",
                path.display(),
                BUNDLED.join(", ")
            );
        }
        let file = tokenizer_file(path).map_err(|e| eyre!(e))?;
        let file = std::fs::canonicalize(&file).unwrap_or(file);
        let tok = TokenText::from_file(&file)?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let config_path = dir.join("tokenizer_config.json");
        let config: Option<serde_json::Value> = match config_path.is_file() {
            true => Some(
                serde_json::from_str(&read_bounded(&config_path)?)
                    .wrap_err_with(|| format!("{} is not JSON", config_path.display()))?,
            ),
            false => None,
        };
        let (template, template_source) = match chat_template {
            Some(t) => {
                let (source, from) = read_template_file(t)?;
                (
                    ChatTemplate::from_source(source, config.as_ref())
                        .wrap_err_with(|| format!("in {from}"))?,
                    from,
                )
            }
            None => find_template(dir, config.as_ref())?,
        };
        Ok(Self {
            tokenizer: tok,
            template,
            tokenizer_file: Some(file),
            template_source,
        })
    }
}

/// The template beside a tokenizer in `dir`: the config's `chat_template`, else
/// `chat_template.jinja`, else `chat_template.json`.
fn find_template(dir: &Path, config: Option<&serde_json::Value>) -> Result<(ChatTemplate, String)> {
    let config_path = dir.join("tokenizer_config.json");
    let source = config
        .map(config_template)
        .transpose()
        .wrap_err_with(|| config_path.display().to_string())?
        .flatten();
    if let Some(source) = source {
        let t = ChatTemplate::from_source(source, config)
            .wrap_err_with(|| format!("in {}", config_path.display()))?;
        return Ok((t, format!("{} (chat_template)", config_path.display())));
    }
    for name in ["chat_template.jinja", "chat_template.json"] {
        let file = dir.join(name);
        if file.is_file() {
            let (source, from) = read_template_file(&file)?;
            let t =
                ChatTemplate::from_source(source, config).wrap_err_with(|| format!("in {from}"))?;
            return Ok((t, from));
        }
    }
    let config_says = if config.is_some() {
        "its tokenizer_config.json has no chat_template"
    } else {
        "it has no tokenizer_config.json"
    };
    bail!(
        "{}: no chat template: {config_says} and there is no chat_template.jinja or \
         chat_template.json beside it (name one with --chat-template FILE)",
        dir.display()
    )
}

/// A template file's Jinja source and a label for messages: a `.jinja` file is the source
/// itself; a JSON file (`tokenizer_config.json`, `chat_template.json`) holds it under
/// `chat_template` (a string, or a list of `{name, template}` of which `default` is used).
fn read_template_file(path: &Path) -> Result<(String, String)> {
    let text = read_bounded(path)?;
    let label = path.display().to_string();
    let Ok(json @ serde_json::Value::Object(_)) = serde_json::from_str::<serde_json::Value>(&text)
    else {
        return Ok((text, label));
    };
    match config_template(&json).wrap_err_with(|| label.clone())? {
        Some(source) => Ok((source, format!("{label} (chat_template)"))),
        None => {
            bail!("{label} is JSON without a chat_template string (a .jinja file is read as is)")
        }
    }
}

/// A small text file, refused when it is not a regular file or over [`MAX_TEMPLATE_BYTES`].
fn read_bounded(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => eyre!("{}: no such file", path.display()),
        _ => eyre!("{}: {e}", path.display()),
    })?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if meta.len() > MAX_TEMPLATE_BYTES {
        bail!(
            "{} is {} MiB, over the {} MiB limit for a chat template or tokenizer config",
            path.display(),
            meta.len() >> 20,
            MAX_TEMPLATE_BYTES >> 20
        );
    }
    let bytes = std::fs::read(path).wrap_err_with(|| format!("reading {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        eyre!(
            "{} is not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}
