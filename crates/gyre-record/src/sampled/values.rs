//! Argument values written untyped (Qwen3-Coder's `<parameter=K>`, GLM's `<arg_value>`,
//! MiniMax's `<parameter name=K>`), typed as vLLM types them: by the tool's JSON schema.

use serde_json::{Map, Value};

/// The schema type of parameter `param` of tool `tool` in `tools` (Chat Completions shape,
/// `{"type": "function", "function": {"name", "parameters"}}`, or a flat `{"name",
/// "parameters"}`), if the schema names one.
pub fn param_type<'a>(tools: &'a [Value], tool: &str, param: &str) -> Option<&'a str> {
    let f = tools.iter().find_map(|t| {
        let f = t.get("function").unwrap_or(t);
        (f.get("name")?.as_str()? == tool).then_some(f)
    })?;
    let prop = f
        .get("parameters")
        .or_else(|| f.get("input_schema"))?
        .get("properties")?
        .get(param)?;
    match prop.get("type")? {
        Value::String(s) => Some(s),
        // `["integer", "null"]`: the first non-null type.
        Value::Array(a) => a.iter().filter_map(Value::as_str).find(|s| *s != "null"),
        _ => None,
    }
}

/// How a value with no schema type is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untyped {
    /// As the raw string (vLLM's Qwen3-Coder parser).
    Text,
    /// As JSON when it parses, else the raw string (GLM, MiniMax).
    JsonOrText,
}

/// `raw` typed by `ty` (the schema's type): strings stay raw; numbers, booleans, objects and
/// arrays are JSON (arrays and objects also Python literals, as Qwen3-Coder's template writes
/// lists with `|string`); a value that does not read as its type stays the raw string, as vLLM
/// keeps it.
pub fn typed(raw: &str, ty: Option<&str>, untyped: Untyped) -> Value {
    let json = || serde_json::from_str::<Value>(raw.trim()).ok();
    let text = || Value::String(raw.to_owned());
    match ty {
        Some("string") => text(),
        Some("integer") => json()
            .filter(|v| v.is_i64() || v.is_u64())
            .unwrap_or_else(text),
        Some("number") => json().filter(Value::is_number).unwrap_or_else(text),
        Some("boolean") => match raw.trim() {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            _ => text(),
        },
        Some("null") if matches!(raw.trim(), "null" | "None") => Value::Null,
        Some("object" | "array") => json()
            .or_else(|| python_literal(raw.trim()))
            .unwrap_or_else(text),
        Some(_) => json().unwrap_or_else(text),
        None => match untyped {
            Untyped::Text => text(),
            Untyped::JsonOrText => json().unwrap_or_else(text),
        },
    }
}

/// Arguments from `(name, raw value)` pairs of tool `tool`.
pub fn arguments<'a>(
    pairs: impl IntoIterator<Item = (String, &'a str)>,
    tools: &[Value],
    tool: &str,
    untyped: Untyped,
) -> Value {
    let mut args = Map::new();
    for (k, v) in pairs {
        let ty = param_type(tools, tool, &k);
        args.insert(k, typed(v, ty, untyped));
    }
    Value::Object(args)
}

/// A Python literal of lists, dicts, strings, numbers, `True`/`False`/`None` (what Jinja's
/// `|string` writes for a list) as JSON.
fn python_literal(s: &str) -> Option<Value> {
    let mut p = Py {
        s: s.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Py<'a> {
    s: &'a [u8],
    i: usize,
}

impl Py<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        match *self.s.get(self.i)? {
            b'[' => {
                self.i += 1;
                let mut out = Vec::new();
                if self.eat(b']') {
                    return Some(Value::Array(out));
                }
                loop {
                    out.push(self.value()?);
                    if self.eat(b']') {
                        return Some(Value::Array(out));
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut out = Map::new();
                if self.eat(b'}') {
                    return Some(Value::Object(out));
                }
                loop {
                    let Value::String(k) = self.value()? else {
                        return None;
                    };
                    if !self.eat(b':') {
                        return None;
                    }
                    out.insert(k, self.value()?);
                    if self.eat(b'}') {
                        return Some(Value::Object(out));
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            q @ (b'\'' | b'"') => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    let c = *self.s.get(self.i)?;
                    self.i += 1;
                    match c {
                        b'\\' => {
                            let e = *self.s.get(self.i)?;
                            self.i += 1;
                            out.push(match e {
                                b'n' => b'\n',
                                b't' => b'\t',
                                b'r' => b'\r',
                                other => other,
                            });
                        }
                        c if c == q => break,
                        c => out.push(c),
                    }
                }
                String::from_utf8(out).ok().map(Value::String)
            }
            _ => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|c| {
                    !matches!(c, b',' | b']' | b'}' | b':') && !c.is_ascii_whitespace()
                }) {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                match word {
                    "True" => Some(Value::Bool(true)),
                    "False" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    w => serde_json::from_str::<Value>(w)
                        .ok()
                        .filter(Value::is_number),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_typed_by_the_schema_and_stay_text_when_they_do_not_read() {
        let tools = [
            json!({"type": "function", "function": {"name": "bash", "parameters": {
            "properties": {"command": {"type": "string"}, "step": {"type": "integer"},
                           "tags": {"type": "array"}, "dry": {"type": ["boolean", "null"]}}}}}),
        ];
        let args = arguments(
            [
                ("command".into(), "echo 1"),
                ("step".into(), "3"),
                ("tags".into(), "['a', \"b\", 2, True]"),
                ("dry".into(), "False"),
                ("other".into(), "7"),
            ],
            &tools,
            "bash",
            Untyped::Text,
        );
        assert_eq!(
            args,
            json!({"command": "echo 1", "step": 3, "tags": ["a", "b", 2, true], "dry": false,
                   "other": "7"})
        );
        assert_eq!(typed("x3", Some("integer"), Untyped::Text), json!("x3"));
        assert_eq!(typed("7", None, Untyped::JsonOrText), json!(7));
        assert_eq!(typed("seven", None, Untyped::JsonOrText), json!("seven"));
        assert_eq!(
            typed("{\"a\": 1}", Some("object"), Untyped::Text),
            json!({"a": 1})
        );
    }
}
