"""The example notebook, executed as a user would run it (nbclient, the
python3 kernel of ipykernel), in a fresh folder: it must run to the end and
write its plot."""

import nbclient
import nbformat

from conftest import REPO


def test_the_asid_study_notebook_runs_and_writes_its_plot(tmp_path, monkeypatch):
    nb = nbformat.read(REPO / "examples" / "notebooks" / "asid-study.ipynb", as_version=4)
    plot = tmp_path / "asid-study.png"
    monkeypatch.setenv("ASID_STUDY_PLOT", str(plot))
    monkeypatch.setenv("ASID_STUDY_RESULTS", str(tmp_path / "asid-study.jsonl"))
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert plot.exists() and plot.stat().st_size > 10_000
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "135 runs" in outputs and "at 95.0% confidence" in outputs
    assert len((tmp_path / "asid-study.jsonl").read_text().splitlines()) == 135
