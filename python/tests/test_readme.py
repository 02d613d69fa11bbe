"""The README's Python example runs as written."""

import re

from conftest import REPO


def test_readme_python_example_runs(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Python and Ray"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "run.jsonl").exists() and (tmp_path / "rows.parquet").exists()
