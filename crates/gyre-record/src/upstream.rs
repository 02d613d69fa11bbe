//! The policy server: a completion of a token-id prompt, with the sampled ids and their
//! log-probs, checked before anything is recorded or answered.
//!
//! vLLM (OpenAI-compatible server): `POST /v1/completions` with `prompt` as a list of ids,
//! `logprobs: 1` and `return_token_ids: true`; the answer's `choices[0].token_ids` and
//! `choices[0].logprobs.token_logprobs`. SGLang has no token ids on that route: its native
//! `POST /generate` takes `input_ids` and `return_logprob: true` and answers
//! `meta_info.output_token_logprobs` as `[logprob, id, text]` triples.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::chat::{ApiError, ErrorKind, Sampling};
use gyre_engine::report::plural;

/// Which server speaks upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// vLLM's OpenAI-compatible `/v1/completions`.
    Vllm,
    /// SGLang's native `/generate`.
    Sglang,
}

impl gyre_format::named::Named for Flavor {
    const ALL: &'static [Self] = &[Flavor::Vllm, Flavor::Sglang];

    fn name(self) -> &'static str {
        match self {
            Flavor::Vllm => "vllm",
            Flavor::Sglang => "sglang",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Flavor::Vllm => "vLLM: POST /v1/completions with return_token_ids",
            Flavor::Sglang => "SGLang: POST /generate with return_logprob",
        }
    }
}

/// How generation ended, as the upstream says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// End of turn (an end-of-sequence token).
    Eos,
    /// The token limit.
    Length,
    /// A stop string matched.
    Stop(String),
}

/// A checked completion.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// Sampled ids.
    pub ids: Vec<u32>,
    /// One finite log-prob per sampled id.
    pub logprobs: Vec<f64>,
    /// Why it stopped.
    pub stopped: Stopped,
    /// The model name sent (vLLM) or served (SGLang), for the record.
    pub model: Option<String>,
    /// The sampling settings sent (`max_tokens` as defaulted or clamped to the context).
    pub sent: Sampling,
}

/// What `/v1/models` says: the model to send and its context length.
#[derive(Clone, Debug, PartialEq)]
struct Served {
    name: String,
    max_model_len: Option<u64>,
}

/// A client of the policy server.
pub struct Upstream {
    http: reqwest::Client,
    base: String,
    flavor: Flavor,
    /// Kept once `/v1/models` answered (a failure, e.g. vLLM still loading, is asked again).
    served: Mutex<Option<Served>>,
    fixed_model: Option<String>,
    /// `--upstream-api-key-env`: the variable's name and the key, sent as a bearer token.
    api_key: Option<(String, String)>,
}

impl Upstream {
    /// A client of `base` (`http://host:port`, with or without `/v1`), waiting at most
    /// `timeout` per call; `model` overrides the model name sent (else the upstream's first
    /// served model, else the client's); `api_key` (the variable it came from, and its value)
    /// is sent as `Authorization: Bearer` on every call.
    pub fn new(
        base: &str,
        flavor: Flavor,
        timeout: Duration,
        model: Option<String>,
        api_key: Option<(String, String)>,
    ) -> Result<Self, String> {
        let trimmed = base.trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        if !trimmed.starts_with("http://") {
            return Err(format!(
                "--upstream must be an http:// URL (got {base:?}); run gyre record next to the \
                 policy server"
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(256)
            .build()
            .map_err(|e| format!("building the HTTP client: {e}"))?;
        Ok(Upstream {
            http,
            base: trimmed.to_owned(),
            flavor,
            served: Mutex::new(None),
            fixed_model: model,
            api_key,
        })
    }

    fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some((_, key)) => req.bearer_auth(key),
            None => req,
        }
    }

    /// Which server it is.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The upstream's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The model to send and its context length: `--model` (its `max_model_len` from
    /// `/v1/models` when listed there), else the one model `/v1/models` lists. Several models
    /// (a base and LoRA adapters) without `--model` is an error, not a silent pick; a failed
    /// `/v1/models` is asked again on the next request.
    async fn served(&self) -> Result<Served, ApiError> {
        let mut cached = self.served.lock().await;
        if let Some(s) = cached.as_ref() {
            return Ok(s.clone());
        }
        let url = format!("{}/v1/models", self.base);
        let listed: Result<Vec<Value>, String> =
            match self.authorized(self.http.get(&url)).send().await {
                Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                    Ok(v) => v
                        .get("data")
                        .and_then(Value::as_array)
                        .cloned()
                        .ok_or_else(|| format!("{url} answered no data list")),
                    Err(e) => Err(format!("{url} answered invalid JSON: {e}")),
                },
                Ok(r) if matches!(r.status().as_u16(), 401 | 403) => {
                    let status = r.status().as_u16();
                    let body = r.bytes().await.unwrap_or_default();
                    return Err(status_error(
                        status,
                        &body,
                        self.api_key.as_ref().map(|(name, _)| name.as_str()),
                    ));
                }
                Ok(r) => Err(format!("{url} answered HTTP {}", r.status().as_u16())),
                Err(e) => Err(format!("cannot reach {url}: {e}")),
            };
        let len_of = |m: &Value| m.get("max_model_len").and_then(Value::as_u64);
        let id_of = |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_owned);
        let served = match (&self.fixed_model, listed) {
            (Some(name), Ok(models)) => Served {
                name: name.clone(),
                max_model_len: models
                    .iter()
                    .find(|m| id_of(m).as_deref() == Some(name))
                    .and_then(len_of),
            },
            // The name is known; the context length is asked for again next time.
            (Some(name), Err(_)) => {
                return Ok(Served {
                    name: name.clone(),
                    max_model_len: None,
                });
            }
            (None, Ok(models)) => match models.as_slice() {
                [one] => Served {
                    name: id_of(one).ok_or_else(|| {
                        ApiError::upstream(format!("{url} lists a model without an id"))
                    })?,
                    max_model_len: len_of(one),
                },
                [] => return Err(ApiError::upstream(format!("{url} lists no model"))),
                several => {
                    let names: Vec<String> = several.iter().filter_map(id_of).collect();
                    return Err(ApiError::upstream(format!(
                        "the upstream serves {} models ({}): start gyre record with --model \
                         NAME to say which one the policy is",
                        names.len(),
                        names.join(", ")
                    )));
                }
            },
            (None, Err(e)) => {
                return Err(ApiError::upstream(format!(
                    "{e}; the model name is asked again on the next request (pass --model to \
                     not depend on it)"
                )));
            }
        };
        *cached = Some(served.clone());
        Ok(served)
    }

    /// The served model's context length (`max_model_len`), when `/v1/models` says it; for
    /// vLLM a failed `/v1/models` is the error [`complete`](Self::complete) would give (SGLang
    /// needs no model name: `None`).
    pub async fn context_len(&self) -> Result<Option<u64>, ApiError> {
        match self.flavor {
            Flavor::Vllm => Ok(self.served().await?.max_model_len),
            Flavor::Sglang => Ok(self.served().await.ok().and_then(|s| s.max_model_len)),
        }
    }

    /// The model name for `/v1/models` answers: the upstream's, else `fallback`.
    pub async fn model(&self, fallback: &str) -> String {
        self.served()
            .await
            .map_or_else(|_| fallback.to_owned(), |s| s.name)
    }

    /// Samples a completion of `prompt`.
    pub async fn complete(
        &self,
        prompt: &[u32],
        sampling: &Sampling,
    ) -> Result<Completion, ApiError> {
        let served = match self.flavor {
            Flavor::Vllm => Some(self.served().await?),
            // SGLang's /generate needs no name; its context length helps when listed.
            Flavor::Sglang => self.served().await.ok(),
        };
        let mut sent = sampling.clone();
        if let Some(len) = served.as_ref().and_then(|s| s.max_model_len) {
            let room = len.saturating_sub(prompt.len() as u64);
            if room == 0 {
                return Err(ApiError::invalid(
                    "messages",
                    format!(
                        "the prompt is {} tokens; the model's context (max_model_len) is {len}",
                        prompt.len()
                    ),
                ));
            }
            // Absent: all the room left (not vLLM's 16 or SGLang's 128); too many: clamped.
            sent.max_tokens = Some(sent.max_tokens.map_or(room, |m| m.min(room)));
        }
        let (url, body) = match self.flavor {
            Flavor::Vllm => (
                format!("{}/v1/completions", self.base),
                vllm_body(
                    served.as_ref().map_or("", |s| s.name.as_str()),
                    prompt,
                    &sent,
                ),
            ),
            Flavor::Sglang => (
                format!("{}/generate", self.base),
                sglang_body(prompt, &sent),
            ),
        };
        let res = self
            .authorized(self.http.post(&url))
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(&url, e))?;
        let status = res.status();
        let bytes = res.bytes().await.map_err(|e| transport_error(&url, e))?;
        if !status.is_success() {
            return Err(status_error(
                status.as_u16(),
                &bytes,
                self.api_key.as_ref().map(|(name, _)| name.as_str()),
            ));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::upstream(format!("the upstream answered invalid JSON: {e}")))?;
        let mut completion = match self.flavor {
            Flavor::Vllm => read_vllm(&answer, prompt),
            Flavor::Sglang => read_sglang(&answer),
        }?;
        completion.model = served.map(|s| s.name);
        completion.sent = sent;
        Ok(completion)
    }
}

fn vllm_body(model: &str, prompt: &[u32], s: &Sampling) -> Value {
    let mut body = json!({
        "model": model,
        "prompt": prompt,
        "logprobs": 1,
        "return_token_ids": true,
        "skip_special_tokens": false,
        "stream": false,
    });
    body.as_object_mut()
        .expect("a JSON object literal")
        .extend(s.fields());
    body
}

fn sglang_body(prompt: &[u32], s: &Sampling) -> Value {
    let mut params = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            params.insert(k.into(), v);
        }
    };
    put("max_new_tokens", s.max_tokens.map(Value::from));
    put("temperature", s.temperature.map(Value::from));
    put("top_p", s.top_p.map(Value::from));
    put("top_k", s.top_k.map(Value::from));
    put("min_p", s.min_p.map(Value::from));
    put("repetition_penalty", s.repetition_penalty.map(Value::from));
    put("sampling_seed", s.seed.map(Value::from));
    put("presence_penalty", s.presence_penalty.map(Value::from));
    put("frequency_penalty", s.frequency_penalty.map(Value::from));
    put(
        "stop",
        (!s.stop.is_empty()).then(|| Value::from(s.stop.clone())),
    );
    put("skip_special_tokens", Some(false.into()));
    json!({
        "input_ids": prompt,
        "sampling_params": params,
        "return_logprob": true,
        "stream": false,
    })
}

fn ids_of(v: Option<&Value>, what: &str) -> Result<Vec<u32>, ApiError> {
    let items = v.and_then(Value::as_array).ok_or_else(|| {
        ApiError::upstream(format!(
            "the upstream answer has no {what} (vLLM returns them with return_token_ids, \
             vLLM 0.10.2 or later)"
        ))
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| ApiError::upstream(format!("{what}[{i}] is not a token id")))
        })
        .collect()
}

fn logprobs_of(items: &[Value], ids: usize, what: &str) -> Result<Vec<f64>, ApiError> {
    if items.len() != ids {
        return Err(ApiError::upstream(format!(
            "the upstream answered {} for {} ({what})",
            plural(items.len(), "log-prob"),
            plural(ids, "sampled token")
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let x = v
                .as_f64()
                .filter(|x| x.is_finite() && *x <= 0.0)
                .ok_or_else(|| ApiError::upstream(format!("{what}[{i}] is not a log-prob: {v}")))?;
            if x <= LOGPROB_FLOOR {
                return Err(ApiError::upstream(format!(
                    "{what}[{i}] is {x}, vLLM's floor for a log-prob it did not compute (the \
                     sampled token was masked or underflowed); not recorded"
                )));
            }
            Ok(x)
        })
        .collect()
}

fn read_vllm(answer: &Value, prompt: &[u32]) -> Result<Completion, ApiError> {
    let choice = answer
        .pointer("/choices/0")
        .ok_or_else(|| ApiError::upstream("the upstream answer has no choices[0]"))?;
    let ids = ids_of(choice.get("token_ids"), "choices[0].token_ids")?;
    if let Some(sent) = choice.get("prompt_token_ids").filter(|v| !v.is_null()) {
        if ids_of(Some(sent), "choices[0].prompt_token_ids")? != prompt {
            return Err(ApiError::upstream(
                "the upstream reports a prompt other than the token ids sent",
            ));
        }
    }
    let lps = choice
        .pointer("/logprobs/token_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ApiError::upstream("the upstream answer has no choices[0].logprobs.token_logprobs")
        })?;
    let logprobs = logprobs_of(lps, ids.len(), "choices[0].logprobs.token_logprobs")?;
    let stopped = match (
        choice.get("finish_reason").and_then(Value::as_str),
        choice.get("stop_reason"),
    ) {
        (Some("length"), _) => Stopped::Length,
        (Some("stop"), Some(Value::String(s))) => Stopped::Stop(s.clone()),
        (Some("stop") | None, _) => Stopped::Eos,
        (Some(other), _) => return Err(unfinished(other)),
    };
    Ok(Completion {
        ids,
        logprobs,
        stopped,
        model: None,
        sent: Sampling::default(),
    })
}

fn read_sglang(answer: &Value) -> Result<Completion, ApiError> {
    let triples = answer
        .pointer("/meta_info/output_token_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ApiError::upstream("the upstream answer has no meta_info.output_token_logprobs")
        })?;
    let mut lps = Vec::with_capacity(triples.len());
    let mut from_triples = Vec::with_capacity(triples.len());
    for (i, t) in triples.iter().enumerate() {
        let lp = t.get(0).cloned().unwrap_or(Value::Null);
        lps.push(lp);
        from_triples.push(t.get(1).cloned().unwrap_or(Value::Null));
        if !t.is_array() {
            return Err(ApiError::upstream(format!(
                "meta_info.output_token_logprobs[{i}] is not [logprob, id, text]"
            )));
        }
    }
    let ids = match answer.get("output_ids").filter(|v| !v.is_null()) {
        Some(v) => ids_of(Some(v), "output_ids")?,
        None => ids_of(
            Some(&Value::Array(from_triples)),
            "meta_info.output_token_logprobs ids",
        )?,
    };
    let logprobs = logprobs_of(&lps, ids.len(), "meta_info.output_token_logprobs")?;
    let finish = answer.pointer("/meta_info/finish_reason");
    let stopped = match finish.and_then(|f| f.get("type")).and_then(Value::as_str) {
        Some("length") => Stopped::Length,
        Some("stop") | None => match finish.and_then(|f| f.get("matched")) {
            Some(Value::String(s)) => Stopped::Stop(s.clone()),
            _ => Stopped::Eos,
        },
        Some(other) => return Err(unfinished(other)),
    };
    Ok(Completion {
        ids,
        logprobs,
        stopped,
        model: None,
        sent: Sampling::default(),
    })
}

/// A generation that ended for another reason than end of turn, a stop string or the length
/// (`abort`, `repetition`, …): not a policy sample to train on, so not recorded.
fn unfinished(reason: &str) -> ApiError {
    ApiError::upstream(format!(
        "the upstream ended the generation with finish reason {reason:?} (not end of turn, a \
         stop string or the length limit); not recorded"
    ))
}

/// vLLM writes -9999.0 for a log-prob it clamped (a token whose probability underflowed or was
/// masked): not the behaviour policy's log-prob, so refused rather than trained on.
const LOGPROB_FLOOR: f64 = -9999.0;

fn transport_error(url: &str, e: reqwest::Error) -> ApiError {
    if e.is_timeout() {
        ApiError::new(
            ErrorKind::Timeout,
            format!("the upstream did not answer in time ({url})"),
        )
    } else if e.is_connect() {
        ApiError::upstream(format!("cannot reach the upstream at {url}: {e}"))
    } else {
        ApiError::upstream(format!("calling the upstream at {url} failed: {e}"))
    }
}

/// An error status from the upstream: its message, as a client error when the upstream refused
/// the request (e.g. a prompt longer than the model's context), else a 502. A 401 or 403 is the
/// proxy's credentials, not the harness's request: a 502 saying which key to give.
fn status_error(status: u16, body: &[u8], key_env: Option<&str>) -> ApiError {
    let v: Option<Value> = serde_json::from_slice(body).ok();
    let message = v
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .and_then(Value::as_str)
        })
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned());
    if status == 401 || status == 403 {
        let fix = match key_env {
            Some(name) => format!("the key in ${name} (--upstream-api-key-env) was refused"),
            None => "start gyre record with --upstream-api-key-env NAME, NAME being the \
                     environment variable that holds the upstream's API key (vLLM --api-key)"
                .to_owned(),
        };
        return ApiError::upstream(format!(
            "the upstream refused gyre record's credentials (HTTP {status}: {}); {fix}",
            message.trim()
        ));
    }
    let kind = if (400..500).contains(&status) && status != 408 && status != 429 {
        ErrorKind::InvalidRequest
    } else {
        ErrorKind::Upstream
    };
    ApiError::new(
        kind,
        format!("the upstream answered HTTP {status}: {}", message.trim()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vllm_answer_is_checked() {
        let ok = json!({"choices": [{"token_ids": [5, 6], "prompt_token_ids": [1, 2],
            "logprobs": {"token_logprobs": [-0.5, 0.0]}, "finish_reason": "length"}]});
        let c = read_vllm(&ok, &[1, 2]).unwrap();
        assert_eq!(
            (c.ids, c.logprobs, c.stopped),
            (vec![5, 6], vec![-0.5, 0.0], Stopped::Length)
        );
        assert!(read_vllm(&ok, &[1, 3]).is_err(), "another prompt");
        let short = json!({"choices": [{"token_ids": [5, 6],
            "logprobs": {"token_logprobs": [-0.5]}}]});
        assert!(
            read_vllm(&short, &[1])
                .unwrap_err()
                .message
                .contains("1 log-prob for 2 sampled tokens")
        );
        let none = json!({"choices": [{"text": "hi", "logprobs": {"token_logprobs": [-0.5]}}]});
        assert!(
            read_vllm(&none, &[1])
                .unwrap_err()
                .message
                .contains("token_ids")
        );
        let nan = json!({"choices": [{"token_ids": [5], "logprobs": {"token_logprobs": [null]}}]});
        assert!(read_vllm(&nan, &[1]).is_err());
    }

    #[test]
    fn other_finish_reasons_and_the_log_prob_floor_are_refused() {
        for reason in ["abort", "repetition"] {
            let v = json!({"choices": [{"token_ids": [5], "finish_reason": reason,
                "logprobs": {"token_logprobs": [-0.5]}}]});
            let e = read_vllm(&v, &[1]).unwrap_err();
            assert!(e.message.contains(reason), "{}", e.message);
            let g = json!({"meta_info": {"finish_reason": {"type": reason},
                "output_token_logprobs": [[-0.1, 9, null]]}});
            assert!(read_sglang(&g).is_err(), "{reason}");
        }
        let stop = json!({"choices": [{"token_ids": [5], "finish_reason": "stop",
            "stop_reason": "END", "logprobs": {"token_logprobs": [-0.5]}}]});
        assert_eq!(
            read_vllm(&stop, &[1]).unwrap().stopped,
            Stopped::Stop("END".into())
        );
        let floor = json!({"choices": [{"token_ids": [5, 6], "finish_reason": "stop",
            "logprobs": {"token_logprobs": [-0.5, -9999.0]}}]});
        let e = read_vllm(&floor, &[1]).unwrap_err();
        assert!(e.message.contains("-9999"), "{}", e.message);
    }

    #[test]
    fn an_sglang_answer_is_read_from_its_triples() {
        let ok = json!({"text": "x", "meta_info": {"finish_reason": {"type": "stop",
            "matched": 151645}, "output_token_logprobs": [[-0.1, 9, null], [-0.2, 151645, null]]}});
        let c = read_sglang(&ok).unwrap();
        assert_eq!((c.ids, c.stopped), (vec![9, 151645], Stopped::Eos));
    }

    #[test]
    fn a_refused_prompt_is_the_clients_error_and_a_crash_is_a_bad_gateway() {
        let e = status_error(
            400,
            br#"{"error": {"message": "maximum context length is 8"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(e.message.contains("maximum context length"));
        assert_eq!(status_error(500, b"boom", None).kind, ErrorKind::Upstream);
        let e = status_error(401, br#"{"error": "Unauthorized"}"#, None);
        assert_eq!(e.kind, ErrorKind::Upstream);
        assert!(
            e.message.contains("--upstream-api-key-env"),
            "{}",
            e.message
        );
        let e = status_error(401, b"{}", Some("VLLM_KEY"));
        assert!(e.message.contains("$VLLM_KEY"), "{}", e.message);
    }
}
