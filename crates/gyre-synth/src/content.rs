//! What the simulated harness talks about: system prompts, tool definitions, tasks with their
//! repositories, tool outputs and the agent's phrases. Fixed text, combined at random.

use serde_json::{Value, json};

pub(crate) const MAIN_SYSTEM: &str = "You are an interactive coding agent working in a git \
repository on the user's machine. Use the tools to inspect and change the code; do not guess \
file contents. Keep answers short and concrete. Before editing a file, read it. After a change, \
run the relevant tests and report what you verified. When a question needs a broad search, \
delegate it to a sub-agent with the Task tool.\n\nEnvironment: Linux, cwd /repo, git clean.";

pub(crate) const SUB_SYSTEM: &str = "You are a read-only research sub-agent. Answer the \
question you are given by searching and reading the repository. Do not edit files. Finish with \
a concise report: the relevant files, functions and line numbers.";

pub(crate) const EVALUATOR_SYSTEM: &str = "You review patches written by a coding agent. Point \
out bugs, missing tests and unhandled cases. Be specific and brief; end with a verdict line.";

pub(crate) const COMPACT_INSTRUCTION: &str = "Your context window is nearly full. Write a \
summary of the conversation so far that lets you continue the task without it: the task, what \
you found, what you changed, what is left to do, and any commands or file paths you will need.";

pub(crate) const CONTINUED_PREFIX: &str = "This session is being continued from a previous \
conversation that ran out of context. The conversation is summarized below:\n\n";

pub(crate) const CRITIQUE_PREFIX: &str =
    "An automated reviewer looked at your change and wrote:\n\n";

/// Tool definitions of the main agent (JSON schemas, OpenAI form).
pub(crate) fn main_tools() -> Vec<Value> {
    vec![
        tool(
            "Bash",
            "Run a shell command in /repo and return its output (stdout and stderr, truncated \
             to 30000 characters). Use it for builds, tests and git.",
            json!({"command": {"type": "string", "description": "The command to run"},
                   "timeout": {"type": "integer", "description": "Timeout in seconds (default 120)"}}),
            &["command"],
        ),
        tool(
            "Read",
            "Read a file and return it with line numbers. Use offset and limit for long files.",
            json!({"file_path": {"type": "string", "description": "Path relative to /repo"},
                   "offset": {"type": "integer"}, "limit": {"type": "integer"}}),
            &["file_path"],
        ),
        tool(
            "Edit",
            "Replace an exact string in a file. old_string must occur exactly once.",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"},
                   "new_string": {"type": "string"}}),
            &["file_path", "old_string", "new_string"],
        ),
        tool(
            "Grep",
            "Search file contents with a regular expression (ripgrep syntax).",
            json!({"pattern": {"type": "string"}, "path": {"type": "string"},
                   "glob": {"type": "string", "description": "Only files matching this glob"}}),
            &["pattern"],
        ),
        tool(
            "Glob",
            "List files matching a glob pattern, newest first.",
            json!({"pattern": {"type": "string"}}),
            &["pattern"],
        ),
        tool(
            "Task",
            "Delegate a self-contained research question to a sub-agent with its own context. \
             It returns a report.",
            json!({"description": {"type": "string", "description": "3-5 word summary"},
                   "prompt": {"type": "string"}}),
            &["description", "prompt"],
        ),
    ]
}

/// The sub-agent's tools: the read-only subset.
pub(crate) fn sub_tools() -> Vec<Value> {
    main_tools()
        .into_iter()
        .filter(|t| {
            matches!(
                t["function"]["name"].as_str(),
                Some("Read" | "Grep" | "Glob" | "Bash")
            )
        })
        .collect()
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}})
}

/// A coding task with the repository it happens in.
pub(crate) struct Task {
    pub prompt: &'static str,
    pub listing: &'static str,
    pub files: &'static [(&'static str, &'static str)],
    pub test_cmd: &'static str,
    pub test_fail: &'static str,
    pub test_pass: &'static str,
    pub grep: (&'static str, &'static str),
    /// `(file, old, new)` edits, applied in order; each makes a new artifact version.
    pub edits: &'static [(&'static str, &'static str, &'static str)],
    pub sub_question: &'static str,
    pub sub_report: &'static str,
    pub summary: &'static str,
    pub final_answer: &'static str,
    pub critiques: &'static [&'static str],
    pub thoughts: &'static [&'static str],
}

pub(crate) const TASKS: &[Task] = &[
    Task {
        prompt: "The CSV importer drops the last row when the file has no trailing newline. \
                 Fix it and add a regression test.",
        listing: "Cargo.toml\nREADME.md\nsrc/lib.rs\nsrc/csv.rs\nsrc/record.rs\ntests/import.rs\n",
        files: &[
            (
                "src/csv.rs",
                "use crate::record::Record;\n\n/// Splits `input` into records, one per line.\npub fn parse(input: &str) -> Vec<Record> {\n    let mut out = Vec::new();\n    let mut line = String::new();\n    for c in input.chars() {\n        if c == '\\n' {\n            out.push(Record::from_line(&line));\n            line.clear();\n        } else {\n            line.push(c);\n        }\n    }\n    out\n}\n",
            ),
            (
                "tests/import.rs",
                "use importer::csv::parse;\n\n#[test]\nfn parses_two_rows() {\n    let rows = parse(\"a,1\\nb,2\\n\");\n    assert_eq!(rows.len(), 2);\n}\n\n#[test]\nfn last_row_without_newline() {\n    let rows = parse(\"a,1\\nb,2\");\n    assert_eq!(rows.len(), 2, \"rows: {rows:?}\");\n}\n",
            ),
            (
                "src/record.rs",
                "#[derive(Debug, Clone, PartialEq)]\npub struct Record {\n    pub fields: Vec<String>,\n}\n\nimpl Record {\n    pub fn from_line(line: &str) -> Self {\n        Self { fields: line.split(',').map(str::to_owned).collect() }\n    }\n}\n",
            ),
        ],
        test_cmd: "cargo test --test import",
        test_fail: "   Compiling importer v0.3.1 (/repo)\n    Finished test [unoptimized + debuginfo] target(s) in 2.41s\n     Running tests/import.rs\n\nrunning 2 tests\ntest parses_two_rows ... ok\ntest last_row_without_newline ... FAILED\n\nfailures:\n\n---- last_row_without_newline stdout ----\nthread 'last_row_without_newline' panicked at tests/import.rs:12:5:\nassertion `left == right` failed: rows: [Record { fields: [\"a\", \"1\"] }]\n  left: 1\n right: 2\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured\n",
        test_pass: "   Compiling importer v0.3.1 (/repo)\n    Finished test [unoptimized + debuginfo] target(s) in 1.87s\n     Running tests/import.rs\n\nrunning 3 tests\ntest parses_two_rows ... ok\ntest last_row_without_newline ... ok\ntest empty_input_has_no_rows ... ok\n\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured\n",
        grep: (
            "from_line",
            "src/csv.rs:9:            out.push(Record::from_line(&line));\nsrc/record.rs:7:    pub fn from_line(line: &str) -> Self {\n",
        ),
        edits: &[
            (
                "src/csv.rs",
                "    }\n    out\n}",
                "    }\n    if !line.is_empty() {\n        out.push(Record::from_line(&line));\n    }\n    out\n}",
            ),
            (
                "tests/import.rs",
                "    assert_eq!(rows.len(), 2, \"rows: {rows:?}\");\n}",
                "    assert_eq!(rows.len(), 2, \"rows: {rows:?}\");\n}\n\n#[test]\nfn empty_input_has_no_rows() {\n    assert!(parse(\"\").is_empty());\n}",
            ),
        ],
        sub_question: "Find every caller of csv::parse and check whether any of them relies on the last row being dropped.",
        sub_report: "Callers of `csv::parse`:\n- src/lib.rs:14 `import_file` passes the whole file; no assumption about trailing rows.\n- tests/import.rs: two tests.\nNothing relies on the last row being dropped; `import_file` even documents that every row is imported.",
        summary: "Task: the CSV importer (src/csv.rs, `parse`) dropped the last row when the input has no trailing newline. Found: the loop only pushes a record on '\\n'. Changed: push the pending line after the loop when it is not empty. Tests: tests/import.rs has `last_row_without_newline`; run `cargo test --test import`. Left: add a test for empty input, re-run the tests.",
        final_answer: "Fixed: `parse` in src/csv.rs now emits the pending line after the loop, so the last row is kept without a trailing newline. Added `empty_input_has_no_rows`; `cargo test --test import` passes (3 tests).",
        critiques: &[
            "The fix keeps the last row, but a line that is only \"\\r\" (CRLF files) now becomes a record with one empty field. Consider trimming '\\r' before `from_line` and add a CRLF test. Verdict: needs a small change.",
            "Looks right. The new test covers the empty input; a test with a quoted comma would be nice but is out of scope. Verdict: accept.",
        ],
        thoughts: &[
            "The loop pushes a record only when it sees '\\n', so whatever is left in `line` at the end is lost.",
            "I should check whether an empty trailing line would now create an empty record.",
            "The test names match the issue; the failing one is `last_row_without_newline`.",
        ],
    },
    Task {
        prompt: "`truncate_display` panics on strings with multi-byte characters (try \"naïve café 日本語\"). \
                 Make it truncate by characters, not bytes.",
        listing: "pyproject.toml\nsrc/textutil/__init__.py\nsrc/textutil/display.py\nsrc/textutil/width.py\ntests/test_display.py\n",
        files: &[
            (
                "src/textutil/display.py",
                "from .width import char_width\n\n\ndef truncate_display(s: str, limit: int) -> str:\n    \"\"\"Cut `s` to at most `limit` columns, adding an ellipsis.\"\"\"\n    data = s.encode(\"utf-8\")\n    if len(data) <= limit:\n        return s\n    return data[: limit - 1].decode(\"utf-8\") + \"…\"\n",
            ),
            (
                "tests/test_display.py",
                "from textutil.display import truncate_display\n\n\ndef test_ascii():\n    assert truncate_display(\"hello world\", 6) == \"hello…\"\n\n\ndef test_multibyte():\n    assert truncate_display(\"naïve café 日本語\", 8) == \"naïve c…\"\n\n\ndef test_wide():\n    assert truncate_display(\"日本語テキスト\", 5) == \"日本…\"\n",
            ),
            (
                "src/textutil/width.py",
                "import unicodedata\n\n\ndef char_width(c: str) -> int:\n    \"\"\"Terminal columns taken by `c` (East Asian wide characters take two).\"\"\"\n    return 2 if unicodedata.east_asian_width(c) in (\"W\", \"F\") else 1\n",
            ),
        ],
        test_cmd: "python -m pytest -q tests/test_display.py",
        test_fail: "..F                                                                     [100%]\n=================================== FAILURES ===================================\n________________________________ test_multibyte ________________________________\n\n    def test_multibyte():\n>       assert truncate_display(\"naïve café 日本語\", 8) == \"naïve c…\"\n\nsrc/textutil/display.py:9: in truncate_display\n    return data[: limit - 1].decode(\"utf-8\") + \"…\"\nE   UnicodeDecodeError: 'utf-8' codec can't decode byte 0xc3 in position 6: unexpected end of data\n=========================== short test summary info ============================\nFAILED tests/test_display.py::test_multibyte - UnicodeDecodeError\n1 failed, 2 passed in 0.04s\n",
        test_pass: "....                                                                    [100%]\n4 passed in 0.03s\n",
        grep: (
            "truncate_display",
            "src/textutil/__init__.py:3:from .display import truncate_display\nsrc/textutil/display.py:4:def truncate_display(s: str, limit: int) -> str:\ntests/test_display.py:1:from textutil.display import truncate_display\n",
        ),
        edits: &[
            (
                "src/textutil/display.py",
                "    data = s.encode(\"utf-8\")\n    if len(data) <= limit:\n        return s\n    return data[: limit - 1].decode(\"utf-8\") + \"…\"",
                "    if sum(char_width(c) for c in s) <= limit:\n        return s\n    out, used = [], 0\n    for c in s:\n        w = char_width(c)\n        if used + w > limit - 1:\n            break\n        out.append(c)\n        used += w\n    return \"\".join(out) + \"…\"",
            ),
            (
                "tests/test_display.py",
                "    assert truncate_display(\"日本語テキスト\", 5) == \"日本…\"",
                "    assert truncate_display(\"日本語テキスト\", 5) == \"日本…\"\n\n\ndef test_emoji():\n    assert truncate_display(\"🦀🦀🦀\", 4) == \"🦀…\"",
            ),
        ],
        sub_question: "Where else does the package slice encoded bytes of a str? List every place that could split a UTF-8 character.",
        sub_report: "Only one place slices encoded bytes: src/textutil/display.py:9 (`data[: limit - 1]`). width.py works on characters. No other `.encode(` calls in src/.",
        summary: "Task: `truncate_display` (src/textutil/display.py) cut UTF-8 bytes and crashed on multi-byte text. Found: it slices `s.encode()`. Changed: it now walks characters and counts columns with `char_width`, so wide characters count as two. Tests: tests/test_display.py (`test_multibyte`, `test_wide`); run `python -m pytest -q tests/test_display.py`. Left: an emoji test.",
        final_answer: "`truncate_display` now counts terminal columns per character (wide characters take two) instead of slicing UTF-8 bytes, so it never splits a character. Added `test_emoji`; `pytest -q tests/test_display.py` passes (4 tests).",
        critiques: &[
            "Combining characters (e.g. \"e\\u0301\") count as one column each here but take zero; truncation may cut between a letter and its accent. Verdict: acceptable, mention it in the docstring.",
            "The loop is O(n) twice; fine for display strings. Tests cover wide and emoji cases. Verdict: accept.",
        ],
        thoughts: &[
            "Slicing the encoded bytes can end in the middle of \"ï\" (0xc3 0xaf), which is exactly the decode error.",
            "Columns are what matter for display, so wide CJK characters should count as two.",
            "The ellipsis takes one column, so the budget for text is limit - 1.",
        ],
    },
    Task {
        prompt: "Requests to /api/items?page=0 return a 500. Page numbers should start at 1 and \
                 page=0 should be a 400 with a clear message.",
        listing: "go.mod\ncmd/server/main.go\ninternal/api/items.go\ninternal/api/items_test.go\ninternal/store/store.go\n",
        files: &[
            (
                "internal/api/items.go",
                "package api\n\nimport (\n\t\"net/http\"\n\t\"strconv\"\n)\n\nfunc (h *Handler) ListItems(w http.ResponseWriter, r *http.Request) {\n\tpage, _ := strconv.Atoi(r.URL.Query().Get(\"page\"))\n\titems, err := h.store.Page((page-1)*h.pageSize, h.pageSize)\n\tif err != nil {\n\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)\n\t\treturn\n\t}\n\twriteJSON(w, items)\n}\n",
            ),
            (
                "internal/api/items_test.go",
                "package api\n\nimport (\n\t\"net/http\"\n\t\"net/http/httptest\"\n\t\"testing\"\n)\n\nfunc TestPageZeroIsBadRequest(t *testing.T) {\n\th := newTestHandler(t)\n\trec := httptest.NewRecorder()\n\th.ListItems(rec, httptest.NewRequest(\"GET\", \"/api/items?page=0\", nil))\n\tif rec.Code != http.StatusBadRequest {\n\t\tt.Fatalf(\"code = %d, want 400\", rec.Code)\n\t}\n}\n",
            ),
            (
                "internal/store/store.go",
                "package store\n\nimport \"errors\"\n\nvar ErrNegativeOffset = errors.New(\"store: negative offset\")\n\nfunc (s *Store) Page(offset, limit int) ([]Item, error) {\n\tif offset < 0 {\n\t\treturn nil, ErrNegativeOffset\n\t}\n\treturn s.items[offset:min(offset+limit, len(s.items))], nil\n}\n",
            ),
        ],
        test_cmd: "go test ./internal/api/...",
        test_fail: "--- FAIL: TestPageZeroIsBadRequest (0.00s)\n    items_test.go:14: code = 500, want 400\nFAIL\nFAIL\tgithub.com/acme/shop/internal/api\t0.012s\nFAIL\n",
        test_pass: "ok  \tgithub.com/acme/shop/internal/api\t0.011s\n",
        grep: (
            "Atoi\\(",
            "internal/api/items.go:9:\tpage, _ := strconv.Atoi(r.URL.Query().Get(\"page\"))\ninternal/api/orders.go:22:\tlimit, err := strconv.Atoi(q.Get(\"limit\"))\n",
        ),
        edits: &[(
            "internal/api/items.go",
            "\tpage, _ := strconv.Atoi(r.URL.Query().Get(\"page\"))\n",
            "\tpage := 1\n\tif p := r.URL.Query().Get(\"page\"); p != \"\" {\n\t\tn, err := strconv.Atoi(p)\n\t\tif err != nil || n < 1 {\n\t\t\thttp.Error(w, \"page must be an integer >= 1\", http.StatusBadRequest)\n\t\t\treturn\n\t\t}\n\t\tpage = n\n\t}\n",
        )],
        sub_question: "Check the other handlers in internal/api for the same unchecked strconv.Atoi pattern and report them.",
        sub_report: "internal/api/orders.go:22 parses `limit` and checks the error, but allows 0 and negative values (it then returns an empty list). No other handler ignores the Atoi error.",
        summary: "Task: GET /api/items?page=0 returned 500; it must be 400. Found: internal/api/items.go ignores the Atoi error and computes a negative offset, which store.Page rejects. Changed: parse page explicitly, default 1, reject < 1 with 400. Tests: `go test ./internal/api/...` (TestPageZeroIsBadRequest). Left: run the tests.",
        final_answer: "`ListItems` now validates `page`: missing means 1, anything non-numeric or < 1 returns 400 \"page must be an integer >= 1\" instead of reaching the store with a negative offset. `go test ./internal/api/...` passes.",
        critiques: &[
            "The handler is fixed, but orders.go has the same class of bug with `limit <= 0`. Also there is no test for a non-numeric page. Verdict: needs a test.",
            "Good validation and a clear message. Verdict: accept.",
        ],
        thoughts: &[
            "Atoi of \"0\" gives 0, so the offset becomes -pageSize and the store returns ErrNegativeOffset, which is mapped to 500.",
            "The error from Atoi is ignored, so page=abc behaves like page=0.",
            "A 400 belongs in the handler; the store is right to reject negative offsets.",
        ],
    },
    Task {
        prompt: "The `retry` decorator in utils/retry.py sleeps even after the last attempt, \
                 so failures take 30 s longer than needed. Fix it without changing the delays.",
        listing: "setup.cfg\nutils/__init__.py\nutils/retry.py\nutils/clock.py\ntests/test_retry.py\n",
        files: &[
            (
                "utils/retry.py",
                "import functools\n\nfrom .clock import sleep\n\n\ndef retry(attempts=3, delay=10.0):\n    def wrap(fn):\n        @functools.wraps(fn)\n        def inner(*args, **kwargs):\n            last = None\n            for i in range(attempts):\n                try:\n                    return fn(*args, **kwargs)\n                except Exception as e:  # noqa: BLE001\n                    last = e\n                sleep(delay * (i + 1))\n            raise last\n        return inner\n    return wrap\n",
            ),
            (
                "tests/test_retry.py",
                "from utils import clock\nfrom utils.retry import retry\n\n\ndef test_no_sleep_after_last_attempt(monkeypatch):\n    slept = []\n    monkeypatch.setattr(clock, \"sleep\", slept.append)\n\n    @retry(attempts=3, delay=1.0)\n    def boom():\n        raise ValueError(\"nope\")\n\n    try:\n        boom()\n    except ValueError:\n        pass\n    assert slept == [1.0, 2.0]\n",
            ),
        ],
        test_cmd: "python -m pytest -q tests/test_retry.py",
        test_fail: "F                                                                       [100%]\n=================================== FAILURES ===================================\n_______________________ test_no_sleep_after_last_attempt _______________________\n>       assert slept == [1.0, 2.0]\nE       assert [1.0, 2.0, 3.0] == [1.0, 2.0]\nE         Left contains one more item: 3.0\n1 failed in 0.02s\n",
        test_pass: "..                                                                      [100%]\n2 passed in 0.02s\n",
        grep: (
            "sleep\\(",
            "utils/retry.py:16:                sleep(delay * (i + 1))\nutils/clock.py:8:def sleep(seconds):\n",
        ),
        edits: &[
            (
                "utils/retry.py",
                "                sleep(delay * (i + 1))",
                "                if i + 1 < attempts:\n                    sleep(delay * (i + 1))",
            ),
            (
                "tests/test_retry.py",
                "    assert slept == [1.0, 2.0]\n",
                "    assert slept == [1.0, 2.0]\n\n\ndef test_success_does_not_sleep(monkeypatch):\n    slept = []\n    monkeypatch.setattr(clock, \"sleep\", slept.append)\n    assert retry()(lambda: 7)() == 7\n    assert slept == []\n",
            ),
        ],
        sub_question: "Does anything import `sleep` from utils.retry directly, so that monkeypatching utils.clock would not affect it?",
        sub_report: "utils/retry.py does `from .clock import sleep`, so patching `clock.sleep` does not reach it: the test patches the wrong name. Either call `clock.sleep(...)` in retry.py or patch `utils.retry.sleep`.",
        summary: "Task: `retry` (utils/retry.py) slept after the final failed attempt. Found: the sleep runs unconditionally at the end of each loop iteration; also retry.py imports `sleep` by name so tests must patch `utils.retry.sleep` or retry.py must call `clock.sleep`. Changed: sleep only when another attempt follows. Tests: `python -m pytest -q tests/test_retry.py`. Left: fix the import so the monkeypatch applies.",
        final_answer: "`retry` now sleeps only between attempts (`if i + 1 < attempts`), so the final failure is raised immediately; delays are unchanged (delay × attempt number). Added `test_success_does_not_sleep`; tests pass.",
        critiques: &[
            "`raise last` loses the traceback context of earlier attempts; consider `raise last from None` or chaining. The import-by-name issue means the test may pass by accident. Verdict: check the monkeypatch target.",
            "Minimal and correct. Verdict: accept.",
        ],
        thoughts: &[
            "The sleep is outside the try/except, so it also runs after the last attempt before `raise last`.",
            "retry.py imports `sleep` by name, so monkeypatching `clock.sleep` may not reach it.",
            "Keeping delay * (i + 1) preserves the existing back-off schedule.",
        ],
    },
];

/// What an agent says before a tool call, by kind of step ("" = nothing).
pub(crate) const PREFACE_LIST: &[&str] = &[
    "I'll check the repository layout.",
    "Let me see which files are here.",
    "",
];
pub(crate) const PREFACE_LOG: &[&str] = &[
    "Let me look at the recent history.",
    "Checking what changed recently.",
    "",
];
pub(crate) const PREFACE_TEST: &[&str] = &[
    "Running the tests to see the current state.",
    "Let me run the tests.",
    "",
];
pub(crate) const PREFACE_READ: &[&str] = &[
    "Let me read the relevant code.",
    "Reading the file before changing it.",
    "",
];
pub(crate) const PREFACE_GREP: &[&str] = &[
    "Searching for the call sites.",
    "Let me find where this is used.",
    "",
];
pub(crate) const PREFACE_EDIT: &[&str] = &["I'll make the change now.", "Applying the fix.", ""];
pub(crate) const PREFACE_TASK: &[&str] = &["I'll have a sub-agent check the related code.", ""];

/// `git log --stat` output for a repository with `files`: long, fixed per task (so it is
/// tokenised once), the bulk that makes contexts grow towards compaction.
pub(crate) fn git_log(files: &[(&str, &str)], seed: usize) -> String {
    const AUTHORS: &[&str] = &[
        "Ana Lima <ana@example.com>",
        "Jörg Weiß <jw@example.org>",
        "Mei Chen <mei@example.net>",
        "Sam Okafor <sam@example.com>",
    ];
    const VERBS: &[&str] = &[
        "Fix",
        "Refactor",
        "Add tests for",
        "Document",
        "Speed up",
        "Simplify",
        "Handle errors in",
        "Rename helpers in",
    ];
    let mut out = String::new();
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15 ^ seed as u64;
    for i in 0..32 {
        h = h
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (path, _) = files[(h >> 33) as usize % files.len()];
        out.push_str(&format!(
            "commit {:016x}{:016x}{:08x}\nAuthor: {}\nDate:   Mon Mar {} 1{}:{:02}:00 2025 +0100\n\n    {} {}\n\n {} | {} {}\n 1 file changed, {} insertions(+), {} deletions(-)\n\n",
            h, h.rotate_left(21), (h >> 13) as u32,
            AUTHORS[(h >> 40) as usize % AUTHORS.len()],
            1 + (31 - i) % 28, i % 10, (h >> 20) % 60,
            VERBS[(h >> 48) as usize % VERBS.len()], path,
            path, 3 + (h >> 12) % 40, "+".repeat(1 + (h >> 8) as usize % 12),
            1 + (h >> 8) % 12, (h >> 4) % 5,
        ));
    }
    out
}

/// Generic reasoning fragments mixed with a task's own thoughts.
pub(crate) const GENERIC_THOUGHTS: &[&str] = &[
    "I need to understand how the data flows before changing anything.",
    "The failing test points at the exact function; reading it first is cheaper than guessing.",
    "A minimal change is better here; the rest of the module looks fine.",
    "After the edit I should run the whole test file, not just the failing test.",
    "Let me keep the public signature unchanged so callers are unaffected.",
    "This might also affect the empty case; I'll check it.",
];

/// Assistant messages the harness writes itself (not model output).
pub(crate) const HARNESS_PREAMBLE: &str = "Checking the working tree before starting.";

/// `git status` output the harness shows with its own preamble call.
pub(crate) const GIT_STATUS: &str = "On branch main\nYour branch is up to date with 'origin/main'.\n\nnothing to commit, working tree clean\n";

/// Numbers lines like the Read tool does.
pub(crate) fn numbered(content: &str) -> String {
    let mut out = String::with_capacity(content.len() + content.len() / 8);
    for (i, line) in content.lines().enumerate() {
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
    }
    out
}
