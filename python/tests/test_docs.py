"""The Python, JSON and TOML blocks of README.md, ARCHITECTURE.md and docs/*.md are tested (the
binary's tests/cli/doc_blocks.rs says which info string means what, and checks the others):

- ``python`` runs as written, in a scratch folder (``python ray`` blocks run in test_ray.py,
  ``python model`` blocks in test_tree.py);
- ``python no-run`` (it needs a trainer, a model, a GPU or a cluster) is compiled, every import
  in it resolves, and so does every ``gyre.…`` name it uses (``gyre.trainers.verl``);
- ``json`` and ``toml`` parse (``...`` marks what an excerpt leaves out)."""

import ast
import importlib
import json
import re
import tomllib

import pytest

from conftest import REPO

DOCS = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks():
    out = []
    for doc in DOCS:
        info, body, start = None, [], 0
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            fence = line.strip().startswith("```")
            if info is None and fence:
                info, body, start = line.strip()[3:].strip(), [], n
            elif info is not None and fence:
                out.append((f"{doc.relative_to(REPO)}:{start}", info, "\n".join(body)))
                info = None
            elif info is not None:
                body.append(line)
    return out


def of(kind):
    found = [pytest.param(text, id=place) for place, info, text in blocks() if info == kind]
    assert found, f"no {kind} block"
    return found


@pytest.mark.parametrize("code", of("python"))
def test_python_blocks_run(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "block", "exec"), {})


def test_the_readme_python_example_writes_what_it_says(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Python and Ray"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "run.jsonl").exists() and (tmp_path / "rows.parquet").exists()


def dotted(node):
    """``a.b.c`` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def resolve(path, names):
    """The object ``path`` (``gyre.trainers.verl``) names, given the block's imported ``names``."""
    head, *rest = path.split(".")
    obj = names[head]
    for i, attr in enumerate(rest):
        if not hasattr(obj, attr):
            raise AttributeError(f"{'.'.join([head, *rest[:i]])} has no attribute {attr!r}")
        obj = getattr(obj, attr)
    return obj


@pytest.mark.parametrize("code", of("python no-run"))
def test_python_blocks_that_cannot_run_name_what_exists(code):
    tree = ast.parse(code)
    compile(tree, "block", "exec")
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                module = importlib.import_module(a.name)
                if a.asname:
                    names[a.asname] = module
                else:
                    names[a.name.split(".")[0]] = importlib.import_module(a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for a in node.names:
                names[a.asname or a.name] = resolve(f"m.{a.name}", {"m": module})
    # A block that goes on from an earlier one of its page uses `gyre` as that one imported it.
    names.setdefault("gyre", importlib.import_module("gyre"))
    used = {dotted(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    checked = 0
    for path in sorted(p for p in used if p and p.split(".")[0] in names):
        obj = names[path.split(".")[0]]
        if getattr(obj, "__name__", "").split(".")[0] != "gyre":
            continue
        resolve(path, names)
        checked += 1
    assert checked, "the block uses nothing of gyre"


def test_the_no_run_check_finds_a_missing_name():
    import gyre

    with pytest.raises(AttributeError, match="gyre.trainers has no attribute 'nope'"):
        resolve("gyre.trainers.nope", {"gyre": gyre})


@pytest.mark.parametrize("text", of("json"))
def test_json_blocks_parse(text):
    # An excerpt's `...` stands for items left out of an array, or for text in a string.
    json.loads(re.sub(r",\s*\.\.\.(?=\s*[\]}])", "", text))


@pytest.mark.parametrize("text", of("toml"))
def test_toml_blocks_parse(text):
    tomllib.loads(text)
