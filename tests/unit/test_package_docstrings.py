"""Package docstrings are the per-package READMEs (STYLE.md §8): each names what is there now.

Regression (issue 29): ``oncelog/__init__.py`` named 5 of its 13 packages and
``coordinator/__init__.py`` said transactions were "being built" a week after they were
served; ``broker/`` and ``protocol/`` had no ``__init__.py`` to say anything at all. Nothing
noticed, because nothing read them. Now every package has a docstring that names each of
its modules and subpackages in a ``literal`` (``name`` or ``name.py``), so a module added
without a word in its package's docstring fails here. Handler modules are the exception:
``broker.dispatch.HANDLERS`` is their list, and it must hold every one of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import oncelog

ROOT = Path(oncelog.__file__).parent
HANDLERS = ROOT / "broker" / "handlers"


def _packages() -> list[Path]:
    return sorted(path for path in [ROOT, *ROOT.rglob("*")]
                  if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py")))


def _members(package: Path) -> set[str]:
    modules = {path.stem for path in package.glob("*.py") if path.name != "__init__.py"}
    subpackages = {path.name for path in package.iterdir()
                   if path.is_dir() and (path / "__init__.py").exists()}
    return modules | subpackages


def _named_in_literals(docstring: str) -> set[str]:
    """Every identifier inside a ``double-backtick`` literal of ``docstring``."""
    return {word for literal in re.findall(r"``(.+?)``", docstring, re.DOTALL)
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", literal)}


@pytest.mark.parametrize("package", _packages(),
                         ids=lambda path: str(path.relative_to(ROOT.parent)))
def test_every_package_docstring_names_each_of_its_modules(package):
    init = package / "__init__.py"
    assert init.exists(), f"{package.relative_to(ROOT.parent)} has no __init__.py to describe it"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    assert docstring, f"{init.relative_to(ROOT.parent)} has no docstring"
    if package == HANDLERS:
        return  # listed by dispatch.HANDLERS, checked below
    missing = _members(package) - _named_in_literals(docstring)
    assert not missing, (f"{init.relative_to(ROOT.parent)}'s docstring does not mention "
                         f"{sorted(missing)}")


def test_dispatch_lists_every_handler_module():
    from oncelog.broker import dispatch
    listed = {module.__name__.rsplit(".", 1)[1] for module in dispatch.HANDLERS.values()}
    assert _members(HANDLERS) == listed
