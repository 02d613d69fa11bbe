"""The typed stub (`gyre/_gyre.pyi`) describes the native module as it is: every public name
exists on both sides, and every function's and method's parameters (names, kinds, defaults)
are the runtime ones; mypy's stubtest agrees. Also: docstrings everywhere."""

import ast
import inspect
import os
import site
import subprocess
import sys
from pathlib import Path

import gyre
from gyre import _gyre

STUB = ast.parse((Path(gyre.__file__).parent / "_gyre.pyi").read_text())
HELPER_TYPES = {"Span", "ToolCall", "Target", "Row", "NumpyRow", "RowT", "Diagnostic", "PathLike", "TokenIds", "Floats", "Json",
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
    """The parameters as the stub writes them: `**settings` (the admission settings, taken
    through the engine's table) stands for one keyword per entry of `gyre.SETTINGS`."""
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
        if p.kind == inspect.Parameter.VAR_KEYWORD:
            assert p.name == "settings", p
            out += [(key, "keyword", ast.literal_eval(default)) for key, _, default, _ in gyre.SETTINGS]
            continue
        default = None if p.default is inspect.Parameter.empty else p.default
        out.append((p.name, kinds[p.kind], default))
    return out


SETTINGS_BEGIN = "# admission settings: generated from gyre.SETTINGS"
SETTINGS_END = "# end of admission settings"


def stub_settings_lines(indent: str) -> str:
    return "".join(f"{indent}{key}: {ty} = {default},\n" for key, ty, default, _ in gyre.SETTINGS)


def regenerate_stub_settings(text: str) -> str:
    """The stub with every generated block of admission keywords written from `gyre.SETTINGS`."""
    out, lines, i = [], text.splitlines(keepends=True), 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].strip().startswith(SETTINGS_BEGIN):
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            i += 1
            while not lines[i].strip().startswith(SETTINGS_END):
                i += 1
            out.append(stub_settings_lines(indent))
            continue
        i += 1
    return "".join(out)


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
        overloads = {}
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and any(
                isinstance(d, ast.Name) and d.id == "overload" for d in item.decorator_list
            ):
                overloads.setdefault(item.name, []).append(stub_params(item))
        for method, variants in overloads.items():
            # Overloads narrow the types (numpy=True → arrays); one of them states the runtime
            # parameters with their defaults, and stubtest checks the rest.
            assert runtime_params(getattr(obj, method)) in variants, (name, method)
            checked += 1
        for item in node.body:
            if not isinstance(item, ast.FunctionDef) or item.name in overloads:
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


def test_numpy_overloads_give_arrays_to_the_type_checker(tmp_path):
    # `row(numpy=True)` and `iter(numpy=True)` are typed as NumPy rows, the defaults as lists;
    # mypy accepts the right uses and refuses the wrong ones.
    (tmp_path / "mypy.ini").write_text("[mypy]\nignore_missing_imports = True\n")
    good = tmp_path / "good.py"
    good.write_text(
        "from typing import List\n"
        "import numpy as np\nimport numpy.typing as npt\nimport gyre\n"
        "rows = gyre.load('run.jsonl').admit()\n"
        "a: npt.NDArray[np.uint32] = rows.row(0, numpy=True)['tokens']\n"
        "b: List[int] = rows.row(0)['tokens']\n"
        "for r in rows.iter(numpy=True):\n    c: npt.NDArray[np.uint8] = r['loss_mask']\n"
        "for s in rows:\n    d: List[int] = s['loss_mask']\n"
    )
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import List\nimport gyre\n"
        "rows = gyre.load('run.jsonl').admit()\n"
        "e: List[int] = rows.row(0, numpy=True)['tokens']\n"
        "for r in rows.iter(numpy=True):\n    f: List[int] = r['loss_mask']\n"
    )
    # mypy finds an installed package (py.typed) through its interpreter's site-packages and
    # refuses those in MYPYPATH; a copy on PYTHONPATH instead must be named to it.
    env = dict(os.environ)
    where = Path(gyre.__file__).resolve().parents[1]
    if str(where) not in {str(Path(p).resolve()) for p in site.getsitepackages()}:
        env["MYPYPATH"] = str(where)

    def mypy(path):
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), str(path)],
            capture_output=True, text=True, cwd=tmp_path, env=env,
        )

    ok = mypy(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = mypy(bad)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert wrong.stdout.count("Incompatible types in assignment") == 2, wrong.stdout


def test_the_stubs_admission_keywords_are_generated_from_the_engines_table():
    """The stub's keywords of `Batch.admit` and `follow` are generated from `gyre.SETTINGS` (the
    engine's `admit::SETTINGS`): a new setting is an entry there, and
    `GYRE_WRITE_STUB=1 pytest python/tests/test_stubs.py` writes its keyword into the stub."""
    path = Path(__file__).resolve().parents[1] / "gyre" / "_gyre.pyi"
    installed = Path(gyre.__file__).parent / "_gyre.pyi"
    committed = path.read_text()
    generated = regenerate_stub_settings(committed)
    assert committed.count(SETTINGS_BEGIN) == 2
    if os.environ.get("GYRE_WRITE_STUB"):
        path.write_text(generated)
        committed = generated
    assert committed == generated, "run GYRE_WRITE_STUB=1 pytest python/tests/test_stubs.py"
    assert installed.read_text() == committed, "the installed stub is not the source's: reinstall"


def test_the_admission_keywords_are_the_engines_settings():
    """`Batch.admit` and `follow` take one keyword per entry of the engine's table of settings
    (`gyre.SETTINGS`, whose keys and defaults `Rows.settings` gives back), with its default."""
    from conftest import DEMO

    defaults = gyre.load(DEMO).admit(advantage="none").settings
    del defaults["advantage"]
    assert [key for key, *_ in gyre.SETTINGS] == list(defaults)
    for key, _, default, _ in gyre.SETTINGS:
        literal = ast.literal_eval(default)
        # The table's text form (`"main,sub"`) reads back as the JSON value (`["main", "sub"]`).
        explicit = gyre.load(DEMO).admit(advantage="none", **{key: literal}).settings
        assert explicit == {**defaults, "advantage": "none"}, key
    explicit = gyre.load(DEMO).admit(advantage="none", **defaults).settings
    assert explicit == {**defaults, "advantage": "none"}


def test_settings_keywords_are_checked_by_the_engines_parsers():
    import pytest
    from conftest import DEMO

    batch = gyre.load(DEMO)
    with pytest.raises(TypeError, match="unexpected keyword argument 'jmx'.*seed, jmax, priority"):
        batch.admit(jmx=3)
    with pytest.raises(ValueError, match="is not a count"):
        batch.admit(jmax=-1)
    with pytest.raises(ValueError, match="not a bool"):
        batch.admit(jmax=True)
    with pytest.raises(ValueError, match="a number, a string or a list of strings, not float"):
        batch.admit(seed=1.5)
    assert batch.admit(priority=["sub", "main"]).settings["priority"] == ["sub", "main"]
    assert batch.admit(priority="sub>main", seed=None).settings == batch.admit(priority="sub,main").settings
    with pytest.raises(TypeError, match="unexpected keyword argument 'jmx'"):
        gyre.follow(DEMO, executions=1, group_size=1, jmx=3)
