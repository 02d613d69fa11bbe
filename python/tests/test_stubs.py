"""The typed stub (`gyre/_gyre.pyi`) describes the native module as it is: every public name
exists on both sides, and every function's and method's parameters (names, kinds, defaults)
are the runtime ones; mypy's stubtest agrees. Also: docstrings everywhere."""

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import gyre
from gyre import _gyre

STUB = ast.parse((Path(gyre.__file__).parent / "_gyre.pyi").read_text())
HELPER_TYPES = {"Span", "ToolCall", "Target", "Row", "Diagnostic", "PathLike", "TokenIds", "Floats", "Json",
                "Advantage", "ClassName"}


def stub_params(fn: ast.FunctionDef):
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional, defaults):
        out.append((arg.arg, "positional", None if d is None else ast.literal_eval(d)))
    if a.vararg:
        out.append((a.vararg.arg, "var", None))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, "keyword", None if d is None else ast.literal_eval(d)))
    return [p for p in out if p[0] not in ("self", "cls")]


def runtime_params(obj):
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.VAR_POSITIONAL: "var",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
    }
    out = []
    for p in inspect.signature(obj).parameters.values():
        if p.name in ("self", "cls", "$self"):
            continue
        default = None if p.default is inspect.Parameter.empty else p.default
        out.append((p.name, kinds[p.kind], default))
    return out


def stub_names():
    names = {}
    for node in STUB.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.AnnAssign, ast.Assign)):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if target.id != "__all__":
                names[target.id] = node
    return names


def test_every_public_name_is_in_the_stub_and_the_module():
    runtime = {n for n in dir(_gyre) if not n.startswith("_")} | {"__version__"}
    stubbed = set(stub_names()) - HELPER_TYPES
    assert stubbed == runtime
    assert set(gyre.__all__) <= runtime


def test_functions_and_methods_match_their_stubs():
    checked = 0
    for name, node in stub_names().items():
        if name in HELPER_TYPES or name == "__version__":
            continue
        obj = getattr(_gyre, name)
        if isinstance(node, ast.FunctionDef):
            assert stub_params(node) == runtime_params(obj), name
            checked += 1
            continue
        if not isinstance(node, ast.ClassDef) or name == "LoadError":
            continue
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            if item.name in ("__init__", "__new__"):
                assert stub_params(item) == runtime_params(obj), name
            elif any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                assert isinstance(inspect.getattr_static(obj, item.name), type(_gyre.Rows.batch_executions)), \
                    (name, item.name)
            elif item.name in ("__len__", "__getitem__", "__iter__", "__next__", "__enter__", "__exit__"):
                assert hasattr(obj, item.name), (name, item.name)
            else:
                assert stub_params(item) == runtime_params(getattr(obj, item.name)), (name, item.name)
            checked += 1
    assert checked > 40


def test_everything_public_has_a_docstring():
    missing = []
    for name in dir(_gyre):
        if name.startswith("_"):
            continue
        obj = getattr(_gyre, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if not attr.startswith("_") and not (getattr(value, "__doc__", "") or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing


def test_mypy_stubtest_finds_no_difference(tmp_path):
    # pyarrow and pandas ship no stubs: their types are Any to mypy.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\n")
    allowlist = Path(__file__).resolve().parents[1] / "stubtest-allowlist.txt"
    p = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "gyre", "--mypy-config-file", str(config),
         "--allowlist", str(allowlist)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
