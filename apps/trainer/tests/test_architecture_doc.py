"""docs/architecture.md names only what exists: modules, files, links and our classes.

A module, file or class the page mentions that is renamed or removed fails here, so the
map is updated with the move; the trainer's layout table must list every module of the
package, so one added or moved without the table fails too. Checked on the source tree
(no imports), so a module whose engine is not installed here (verl, TRL, rLLM) is
checked all the same.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "architecture.md"
TRAINER_PKG = ROOT / "apps" / "trainer" / "src" / "patchgym_trainer"
NOT_OURS = {"TimeoutError", "GRPOTrainer", "AgentTrainer"}
"""Names the page mentions that belong to Python, TRL and rLLM."""


def src_roots() -> dict[str, Path]:
    """Top-level import name -> its folder, for every workspace member."""
    roots = {}
    for pkg in [*ROOT.glob("packages/*/src/*"), *ROOT.glob("apps/*/src/*")]:
        if (pkg / "__init__.py").exists():
            roots[pkg.name] = pkg
    return roots


def module_file(dotted: list[str], roots: dict[str, Path]) -> tuple[Path | None, list[str]]:
    """The file of the longest module prefix of ``dotted``, and the names after it."""
    base = roots.get(dotted[0])
    if base is None:
        return None, dotted
    found, rest = base / "__init__.py", dotted[1:]
    for i in range(1, len(dotted)):
        folder = base.joinpath(*dotted[1 : i + 1])
        if (folder / "__init__.py").exists():
            found, rest = folder / "__init__.py", dotted[i + 1 :]
        elif folder.with_suffix(".py").exists():
            found, rest = folder.with_suffix(".py"), dotted[i + 1 :]
        else:
            break
    return found, rest


def code_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", DOC.read_text())


def test_every_module_named_exists() -> None:
    roots = src_roots()
    missing = []
    for span in code_spans():
        name = span.removesuffix("()")
        if not re.fullmatch(r"patchgym_\w+(\.\w+)*", name):
            continue
        path, rest = module_file(name.split("."), roots)
        if path is None:
            missing.append(f"{span}: no package {name.split('.')[0]}")
            continue
        text = path.read_text()
        for attr in rest:
            if not re.search(rf"\b{re.escape(attr)}\b", text):
                missing.append(f"{span}: {attr} not in {path.relative_to(ROOT)}")
    assert not missing, "docs/architecture.md names what is gone:\n" + "\n".join(missing)


def test_every_file_and_link_exists() -> None:
    text = DOC.read_text()
    missing = []
    for link in re.findall(r"\]\((\.\./[^)#]+)", text):
        if not (DOC.parent / link).exists():
            missing.append(link)
    for span in code_spans():
        if re.fullmatch(r"[\w./-]+/[\w.-]+\.(py|yaml|md|toml)", span):
            candidates = [ROOT / span, TRAINER_PKG / span, ROOT / "apps" / "trainer" / span]
            if not any(c.exists() for c in candidates):
                missing.append(span)
    assert not missing, "docs/architecture.md points at missing files:\n" + "\n".join(missing)


def test_every_class_named_is_ours_and_defined() -> None:
    sources = "\n".join(
        p.read_text()
        for pattern in ("packages/*/src/**/*.py", "apps/*/src/**/*.py")
        for p in ROOT.glob(pattern)
        if "/bundled/tasks/" not in str(p)
    )
    missing = [
        span
        for span in set(code_spans())
        if re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", span)  # CamelCase: a class or type alias
        and span not in NOT_OURS
        and not re.search(rf"^\s*(class {span}\b|{span}\s*=)", sources, re.M)
    ]
    assert not missing, f"docs/architecture.md names classes that are gone: {sorted(missing)}"


def layout_rows() -> list[tuple[list[str], list[str]]]:
    """The trainer layout table: (names in the first column, code spans in the second)."""
    text = DOC.read_text()
    section = text.split("## The trainer's layout", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        names = [n.rstrip("/") for n in re.findall(r"`([^`]+)`", cells[0])]
        rows.append((names, re.findall(r"`([^`]+)`", cells[1])))
    return rows


def children(folder: Path) -> set[str]:
    """Modules, packages and (for conf/) folders directly in ``folder``."""
    out = {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return out | {p.name for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_layout_table_is_the_package() -> None:
    """Every module and folder of ``patchgym_trainer`` has a row, and each row of a folder
    names exactly the modules in it: a module added, moved or removed fails here."""
    rows = layout_rows()
    named = [n for names, _ in rows for n in names]
    assert sorted(named) == sorted(children(TRAINER_PKG)), "the layout table's first column"
    for names, spans in rows:
        folder = TRAINER_PKG / names[0]
        if len(names) != 1 or not folder.is_dir():
            continue
        listed = {s for s in spans if re.fullmatch(r"\w+", s)}
        assert listed == children(folder), f"the layout table's row for {names[0]}"
