"""The workflow passes `snakemake --lint` and the code passes ruff."""

import subprocess

from tests.conftest import BIN, REPO, tool_env


def test_snakemake_lint_is_clean():
    done = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=tool_env())
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Congratulations, your workflow is in a good condition!" in output


def test_ruff_is_clean():
    done = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout
