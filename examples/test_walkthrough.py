"""Execute examples/walkthrough.ipynb top to bottom with nbclient; a failing cell fails.

Needs the trainer with its ``cpu`` extra (the notebook serves a tiny model on CPU) and its
``notebook`` group (nbclient, nbformat, ipykernel)::

    uv run nox -s notebook

The notebook is stored without outputs; the executed copy is written to
``$PATCHGYM_NOTEBOOK_OUT`` (default: the test's tmp folder) for inspection.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOK = Path(__file__).parent / "walkthrough.ipynb"


def test_notebook_is_stored_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.timeout(900)
def test_walkthrough_executes(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["PATCHGYM_WALKTHROUGH_DIR"] = str(tmp_path / "work")
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    out = Path(os.environ.get("PATCHGYM_NOTEBOOK_OUT") or tmp_path / "walkthrough.executed.ipynb")
    nbformat.write(nb, out)
    text = "\n".join(
        str(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "all 6 tasks behave" in text
    assert "6 blocking" in text or "preflight" in text
    images = [
        o for c in nb.cells for o in c.get("outputs", []) if "image/svg+xml" in o.get("data", {})
    ]
    assert images, "the rollout chart is shown inline"
