"""Every file the workflow reads or writes, named once: the rules build their patterns
here (a wildcard such as "{cell}" passed for a value gives the pattern), and the Python
side computes the same paths for its cells, so that the two cannot drift apart.

All paths are relative to the workflow's working directory, as Snakemake sees them; they
are part of what Snakemake compares with its records (outputs, logs, shell commands), so a
change here measures finished cells again.
"""

from pathlib import Path

RESULTS = "results"
RUNS_NAME, FAILED_NAME = "runs", "failed"
RUNS = f"{RESULTS}/{RUNS_NAME}"  # one record per measured cell
FAILED = f"{RESULTS}/{FAILED_NAME}"  # the record of a cell that crashed or timed out
ROUNDS = f"{RESULTS}/rounds"  # a cell's records of the rounds before its last
REFERENCE = f"{RESULTS}/reference"  # shared weights and reference outputs
DATA = f"{RESULTS}/data"  # training data sets as image files
PEAK = f"{RESULTS}/peak"  # the machine's GEMM peaks
LOGS = "logs"

SUMMARY_PARQUET = f"{RESULTS}/summary.parquet"
SUMMARY_CSV = f"{RESULTS}/summary.csv"
PROVENANCE = f"{RESULTS}/provenance.json"
RUN_LOCK = f"{RESULTS}/.run.lock"  # held by the run using the results folder (dlbench.run.runlock)
REPORT = "report/report.html"
COMPARE_HTML, COMPARE_CSV = "report/compare.html", "report/compare.csv"
AGGREGATE_LOG = f"{LOGS}/aggregate.log"
REPORT_NOTEBOOK, REPORT_LOG = f"{LOGS}/report.ipynb", f"{LOGS}/report.log"
COMPARE_NOTEBOOK, COMPARE_LOG = f"{LOGS}/compare.ipynb", f"{LOGS}/compare.log"

Value = str | int


# -- measured cells ------------------------------------------------------------------------


def result(cell_id: str) -> str:
    """A cell's record: results/runs/<cell id>.json."""
    return f"{RUNS}/{cell_id}.json"


def round_dir(round_: Value) -> str:
    """The records of one round (measurement.rounds)."""
    return f"{ROUNDS}/r{round_}"


def round_result(round_: Value, cell_id: str) -> str:
    """A cell's record of one round (measurement.rounds): the last round's job keeps its
    own there too, and combines them all into the cell's result (`result`)."""
    return f"{round_dir(round_)}/{cell_id}.json"


def compile_cache(unit: str) -> str:
    """The compilers' caches of a measuring job's cells, kept from its first round for its
    later ones (torch.compile's, JAX's, TensorFlow XLA's)."""
    return f"{ROUNDS}/cache/{unit}"


def round_log(round_: Value, job_id: str) -> str:
    """The log of a measuring job's round before the last (a cell's or a group's)."""
    return f"{LOGS}/rounds/r{round_}/{job_id}.log"


def failed(cell_id: str) -> str:
    """The record of a cell that crashed or timed out, kept apart from the results so
    that a re-run retries it."""
    return f"{FAILED}/{cell_id}.json"


def cell_log(cell_id: str) -> str:
    """The log of the job that measures one cell alone."""
    return f"{LOGS}/runs/{cell_id}.log"


def group_log(group_id: str) -> str:
    """The log of the job that measures a group of cells in one process."""
    return f"{LOGS}/groups/{group_id}.log"


def failed_beside(result_file: Path) -> Path:
    """Where `dlbench run --out X` keeps a failed record by default: ../failed/<name>,
    as the workflow lays them out (results/runs/ beside results/failed/)."""
    return result_file.parent.parent / FAILED_NAME / result_file.name


def failed_dir_beside(runs_dir: Path) -> Path:
    """The failed records' folder beside a folder of results (`dlbench run --out-dir`)."""
    return runs_dir.parent / FAILED_NAME


# -- the correctness check's shared inputs (dlbench.reference) ------------------------------


def reference_dir(model: str) -> str:
    return f"{REFERENCE}/{model}"


def weights(model: str) -> str:
    """A model's shared seeded weights (safetensors)."""
    return f"{reference_dir(model)}/model.safetensors"


def reference_output_name(batch: Value, seqlen: Value) -> str:
    """The file name of a reference output in its model's folder."""
    return f"b{batch}_s{seqlen}.npz"


def reference_output(model: str, batch: Value, seqlen: Value) -> str:
    """The reference output (PyTorch eager fp32 on the CPU) of a model, batch and length."""
    return f"{reference_dir(model)}/{reference_output_name(batch, seqlen)}"


def reference_generation_name(batch: Value, prompt: Value, new_tokens: Value) -> str:
    """The file name of the reference's generated ids in its model's folder."""
    return f"generation_b{batch}_p{prompt}_n{new_tokens}.npz"


def reference_generation(model: str, batch: Value, prompt: Value, new_tokens: Value) -> str:
    """The reference's generated ids (PyTorch eager fp32 on the CPU, greedy) of a model,
    batch, prompt length and number of new tokens."""
    return f"{reference_dir(model)}/{reference_generation_name(batch, prompt, new_tokens)}"


def reference_generation_log(model: str, batch: Value, prompt: Value,
                             new_tokens: Value) -> str:
    return f"{LOGS}/reference/{model}_generation_b{batch}_p{prompt}_n{new_tokens}.log"


def weights_log(model: str) -> str:
    return f"{LOGS}/reference/{model}_weights.log"


def reference_output_log(model: str, batch: Value, seqlen: Value) -> str:
    return f"{LOGS}/reference/{model}_b{batch}_s{seqlen}.log"


# -- training data sets (dlbench.data) --------------------------------------------------------

MANIFEST = "manifest.json"


def dataset(name: str) -> str:
    """A data set's folder: PNG files in class folders and the manifest."""
    return f"{DATA}/{name}"


def manifest(name: str) -> str:
    """A data set's manifest, written last: a folder with one is complete."""
    return f"{dataset(name)}/{MANIFEST}"


def dataset_log(name: str) -> str:
    return f"{LOGS}/data/{name}.log"


# -- the machine's GEMM peaks (dlbench.run.peak) -------------------------------------------


def peak(device: str, precision: str, threads: Value) -> str:
    """The peak of a device, precision and thread count: the best of its libraries."""
    return f"{PEAK}/{device}_{precision}_t{threads}.json"


def peak_library(device: str, precision: str, threads: Value, library: str) -> str:
    """One library's figure, joined into `peak`."""
    return f"{PEAK}/libraries/{device}_{precision}_t{threads}_{library}.json"


def peak_log(device: str, precision: str, threads: Value) -> str:
    return f"{LOGS}/peak/{device}_{precision}_t{threads}.log"


def peak_library_log(device: str, precision: str, threads: Value, library: str) -> str:
    return f"{LOGS}/peak/{device}_{precision}_t{threads}_{library}.log"


def peaks_measured(root: Path = Path(".")) -> list[Path]:
    """The peak records present under root (not the libraries')."""
    return sorted((root / PEAK).glob("*.json"))
