"""The rules' patterns and the Python side's paths are the same (dlbench.files.paths): every job
that the workflow plans writes exactly the files and logs that the Python side computes for
its cells and shared inputs, and its command names them."""

import re

from dlbench.files import paths
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.run import peak
from tests.conftest import snakemake

# Every scenario, groups of two scenarios (inference, generation: per_group, each its own
# rule) and cells that cannot apply (graph in PyTorch), two data sets and two reference
# outputs.
CONFIG = {
    "frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"],
    "inference": {"models": ["tiny-bert"], "batch_sizes": [1, 2], "sequence_lengths": [8],
                  "optimizations": ["eager", "graph"]},
    "training": {"models": ["cnn"], "datasets": ["synthetic", "digits"], "batch_sizes": [8],
                 "pipelines": ["w0"], "optimizers": ["sgd"], "optimizations": ["eager"]},
    "train_step": {"models": ["tiny-gpt2"], "batch_sizes": [2], "sequence_lengths": [16],
                   "optimizers": ["adam"], "optimizations": ["eager"]},
    "generation": {"models": ["tiny-gpt2"], "batch_sizes": [1], "prompt_lengths": [8],
                   "new_tokens": [4, 5], "optimizations": ["eager"]},
    "measurement": {"process": "per_group", "threads": 2},
}


def planned_jobs(dry_run: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, its fields: output, log, Shell command) of every job a dry run lists."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:)", dry_run)[1:]:
        rule = block.split(":", 1)[0].removeprefix("rule ")
        fields = dict(re.findall(r"^\s*(output|log|Shell command): (.*)$", block, re.M))
        jobs.append((rule, fields))
    return jobs


def python_side(validated: dict) -> set[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(rule, outputs, logs) of every job, as dlbench's Python side names them."""
    process, threads = validated["measurement"]["process"], validated["measurement"]["threads"]
    cells = expand_cells(validated)
    runnable = [cell for cell in cells if cell.unsupported_reason() is None]
    jobs = set()
    groups: dict[str, list] = {}
    for cell in cells:
        if cell.grouped(process):
            groups.setdefault(cell.group_id, []).append(cell)
        else:
            jobs.add(("measure_cell", (cell.result_path,), (cell.log_path(process),)))
    for group in groups.values():
        # inference's rule as v1 named it, another scenario's with its name
        scenario = group[0].scenario
        rule = "measure_group" + ("" if scenario == "inference" else f"_{scenario}")
        jobs.add((rule, tuple(sorted(c.result_path for c in group)),
                  (group[0].log_path(process),)))
    for cell in runnable:
        inputs = cell.spec.inputs(cell)
        if "weights" in inputs:
            jobs.add(("reference_weights", (inputs["weights"],), (paths.weights_log(cell.model),)))
            batch, seqlen = cell.size("batch"), cell.size("seqlen")
            if cell.scenario == "generation":
                new = cell.size("new_tokens")
                jobs.add(("reference_generation", (inputs["reference"],),
                          (paths.reference_generation_log(cell.model, batch, seqlen, new),)))
            else:
                jobs.add(("reference_output", (inputs["reference"],),
                          (paths.reference_output_log(cell.model, batch, seqlen),)))
        if "data" in inputs:
            name = cell.size("dataset")
            jobs.add(("dataset", (inputs["data"],), (paths.dataset_log(name),)))
    for device, precision in {(c.device, c.spec.precision(c.optimization)) for c in runnable}:
        frameworks = {c.framework for c in runnable if c.device == device}
        jobs.add(("peak", (paths.peak(device, precision, threads),),
                  (paths.peak_log(device, precision, threads),)))
        for library in peak.libraries(device, frameworks):
            jobs.add(("peak_library", (paths.peak_library(device, precision, threads, library),),
                      (paths.peak_library_log(device, precision, threads, library),)))
    jobs.add(("aggregate", tuple(sorted((paths.SUMMARY_PARQUET, paths.SUMMARY_CSV,
                                         paths.PROVENANCE))), (paths.AGGREGATE_LOG,)))
    jobs.add(("report", (paths.REPORT,), tuple(sorted((paths.REPORT_NOTEBOOK,
                                                       paths.REPORT_LOG)))))
    return jobs


def test_the_rules_write_the_paths_that_python_computes(tmp_path):
    dry = snakemake(tmp_path, CONFIG, "--cores", "2", "--dry-run", "--printshellcmds")
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = planned_jobs(dry.stdout + dry.stderr)
    planned = {(rule, tuple(sorted(f.get("output", "").split(", "))),
                tuple(sorted(f.get("log", "").split(", "))))
               for rule, f in jobs if rule != "all"}
    validated = config.validate(CONFIG)
    assert planned == python_side(validated)
    # The commands name the files that the Python side reads back (dlbench.recovery): a
    # cell's failed record, a group's folder of results.
    cells = {cell.result_path: cell for cell in expand_cells(validated)}
    commands = {f["output"]: f["Shell command"] for rule, f in jobs
                if rule in ("measure_cell", "measure_group", "measure_group_generation")}
    for outputs, command in commands.items():
        first = cells[outputs.split(", ")[0]]
        if first.grouped("per_group"):
            assert f" --out-dir {paths.RUNS} >" in command
        else:
            assert f" --out {first.result_path} --failed-out {first.failed_path} >" in command
    # 4 inference groups, 2 generation groups, 4 training and 2 train_step cells
    assert len(commands) == 12
