"""The example pipelines parse and say what docs/examples.md promises; the
notebook runner's JUnit part works without executing anything."""

from __future__ import annotations

import importlib.util
import json
import py_compile
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PIPELINES = sorted(EXAMPLES.glob("*.yml"))


def load(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def steps_of(pipeline: dict) -> list[dict]:
    if "steps" in pipeline:
        return pipeline["steps"]
    return [step for job in pipeline["jobs"] for step in job["steps"]]


def scripts_of(pipeline: dict) -> str:
    return "\n".join(s.get("script", "") for s in steps_of(pipeline))


def task(pipeline: dict, name: str) -> dict:
    (found,) = [s for s in steps_of(pipeline) if s.get("task") == name]
    return found


def test_all_four_examples_exist() -> None:
    assert {p.name for p in PIPELINES} == {
        "gpu-tests.yml",
        "container-job.yml",
        "notebooks.yml",
        "datasets.yml",
    }


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_pipeline_parses_and_targets_a_self_hosted_pool(path: Path) -> None:
    pipeline = yaml.safe_load(path.read_text())
    assert isinstance(pipeline, dict)
    assert pipeline["pool"]["name"] == "gpu"  # a self-hosted pool, never a vmImage
    assert "vmImage" not in pipeline["pool"]
    assert steps_of(pipeline)
    for step in steps_of(pipeline):
        assert step.get("displayName") or step.get("checkout"), step


def test_gpu_tests_pipeline() -> None:
    pipeline = load("gpu-tests.yml")
    scripts = scripts_of(pipeline)
    assert "nvidia-smi" in scripts
    assert "nvcc -O2" in scripts and "examples/cuda/vector_add.cu" in scripts
    assert (EXAMPLES / "cuda" / "vector_add.cu").is_file()
    assert "--junitxml=" in scripts and "examples/tests" in scripts
    publish = task(pipeline, "PublishTestResults@2")
    assert publish["condition"] == "succeededOrFailed()"
    assert publish["inputs"]["testResultsFormat"] == "JUnit"
    py_compile.compile(str(EXAMPLES / "tests" / "test_gpu.py"), doraise=True)


def test_container_job_asks_for_gpus() -> None:
    pipeline = load("container-job.yml")
    (container,) = pipeline["resources"]["containers"]
    assert "--gpus all" in container["options"]
    assert pipeline["jobs"][0]["container"] == container["container"]
    text = (EXAMPLES / "container-job.yml").read_text()
    assert "docker_socket = true" in text and "root on the host" in text


def test_datasets_pipeline_reads_env_and_proves_read_only() -> None:
    scripts = scripts_of(load("datasets.yml"))
    assert "$IMAGENET_DIR" in scripts
    assert 'touch "$probe"' in scripts and "exit 1" in scripts


def test_notebooks_pipeline_runs_the_runner() -> None:
    pipeline = load("notebooks.yml")
    scripts = scripts_of(pipeline)
    assert "examples/notebooks/run_notebooks.py" in scripts and "--junit" in scripts
    assert task(pipeline, "PublishTestResults@2")["inputs"]["testResultsFormat"] == "JUnit"
    nb = json.loads((EXAMPLES / "notebooks" / "gpu_check.ipynb").read_text())
    assert nb["nbformat"] == 4
    assert any(c["cell_type"] == "code" for c in nb["cells"])


# --------------------------------------------------------------------------- run_notebooks.py


@pytest.fixture(scope="module")
def runner():
    path = EXAMPLES / "notebooks" / "run_notebooks.py"
    spec = importlib.util.spec_from_file_location("run_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_notebooks"] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["run_notebooks"]


def cell(source: str, *outputs: dict, count: int | None = 1) -> dict:
    return {
        "cell_type": "code",
        "source": source,
        "outputs": list(outputs),
        "execution_count": count,
        "metadata": {},
    }


def stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


PASSING = {
    "cells": [
        {"cell_type": "markdown", "source": "# ok", "metadata": {}},
        cell("print('hi')", stream("hi\n")),
        cell(
            "1 + 1",
            {
                "output_type": "execute_result",
                "data": {"text/plain": "2"},
                "execution_count": 2,
                "metadata": {},
            },
        ),
    ]
}
FAILING = {
    "cells": [
        cell("import math", count=1),
        cell(
            ["print('loading data')\n", "x = 1 / 0\n"],
            stream("loading data\n"),
            {
                "output_type": "error",
                "ename": "ZeroDivisionError",
                "evalue": "division by zero",
                "traceback": [
                    "\x1b[0;31mZeroDivisionError\x1b[0m  Traceback (most recent call last)",
                    "Cell \x1b[0;32mIn[2], line 2\x1b[0m\n      x = 1 / 0",
                ],
            },
            count=2,
        ),
        cell("print('never')", count=None),
    ]
}
DIED = {"cells": [cell("big = bytearray(10**12)", count=1), cell("after()", count=None)]}


def test_results_from_executed_notebooks(runner) -> None:
    ok = runner.result_from_notebook(PASSING, "a.ipynb", 1.5)
    assert ok.passed and ok.cell is None
    bad = runner.result_from_notebook(FAILING, "b.ipynb", 2.0)
    assert not bad.passed
    assert bad.cell == 2
    assert bad.source == "print('loading data')\nx = 1 / 0\n"
    assert bad.output == "loading data\n"
    assert bad.error == "ZeroDivisionError: division by zero"
    assert "\x1b" not in bad.traceback and "In[2], line 2" in bad.traceback
    died = runner.result_from_notebook(DIED, "c.ipynb", 3.0, "the kernel died (out of memory?)")
    assert not died.passed
    assert died.cell == 1 and died.source == "big = bytearray(10**12)"


def test_junit_has_one_testcase_per_notebook_with_the_failing_cell(runner) -> None:
    results = [
        runner.result_from_notebook(PASSING, "train/a.ipynb", 1.5),
        runner.result_from_notebook(FAILING, "b.ipynb", 2.0),
        runner.result_from_notebook(DIED, "c.ipynb", 3.0, "the kernel died"),
    ]
    root = ET.fromstring(runner.junit_xml(results).encode())
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    assert suite.get("time") == "6.500"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["train/a.ipynb", "b.ipynb", "c.ipynb"]
    assert cases["train/a.ipynb"].find("failure") is None
    failure = cases["b.ipynb"].find("failure")
    assert failure.get("message") == "cell 2: ZeroDivisionError: division by zero"
    assert "--- cell source ---\nprint('loading data')\nx = 1 / 0" in failure.text
    assert "--- cell output ---\nloading data" in failure.text
    assert "--- traceback ---" in failure.text and "\x1b" not in failure.text
    assert cases["c.ipynb"].find("failure").get("message") == "cell 1: the kernel died"


def test_huge_failure_text_is_cut(runner) -> None:
    result = runner.NotebookResult(
        name="x", seconds=0, passed=False, cell=1, error="E: e", source="s", output="o" * 100_000
    )
    text = ET.fromstring(runner.junit_xml([result]).encode()).find(".//failure").text
    assert len(text) < runner.MAX_OUTPUT_CHARS + 100 and "[… cut …]" in text


def test_find_notebooks_skips_checkpoints(runner, tmp_path: Path) -> None:
    (tmp_path / "sub" / ".ipynb_checkpoints").mkdir(parents=True)
    for name in ("a.ipynb", "sub/b.ipynb", "sub/.ipynb_checkpoints/b-checkpoint.ipynb"):
        (tmp_path / name).write_text("{}")
    found = runner.find_notebooks([tmp_path])
    assert [name for _, name in found] == ["a.ipynb", "sub/b.ipynb"]


def test_cli_writes_junit_and_executed_notebooks(runner, tmp_path: Path, monkeypatch) -> None:
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    (nbdir / "good.ipynb").write_text("{}")
    (nbdir / "bad.ipynb").write_text("{}")
    canned = {"good.ipynb": PASSING, "bad.ipynb": FAILING}
    monkeypatch.setattr(runner, "execute", lambda path, timeout, kernel: (canned[path.name], None))
    junit, out = tmp_path / "r" / "junit.xml", tmp_path / "executed"
    code = runner.main([str(nbdir), "--junit", str(junit), "--output-dir", str(out)])
    assert code == 1
    names = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
    assert names == ["bad.ipynb", "good.ipynb"]
    assert json.loads((out / "bad.ipynb").read_text()) == FAILING


def test_cli_without_nbclient_says_what_to_install(runner, tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "a.ipynb").write_text("{}")
    monkeypatch.setitem(sys.modules, "nbformat", None)  # makes the import fail
    monkeypatch.setitem(sys.modules, "nbclient", None)
    code = runner.main([str(tmp_path), "--junit", str(tmp_path / "j.xml")])
    assert code == 2
    assert "pip install nbclient nbformat ipykernel" in capsys.readouterr().err


def test_cli_with_no_notebooks(runner, tmp_path, capsys) -> None:
    assert runner.main([str(tmp_path), "--junit", str(tmp_path / "j.xml")]) == 2
    assert "no notebooks found" in capsys.readouterr().err
