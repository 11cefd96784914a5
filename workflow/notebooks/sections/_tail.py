# %% tags=["parameters"]
# The end of the report, for the cells of every scenario. This cell lets the section run on
# its own; in the report, the head's parameters replace it.
summary = "results/summary.parquet"

# %%
from dlbench.analysis.quality import quality
from dlbench.analysis.reproduce import reproduce
from dlbench.analysis.startup import most_startups_at_once, startup
from dlbench.analysis.summary import load, timed
from dlbench.format import blank_repeats, md_code_block
from dlbench.measure.flags import (
    BUSY_OTHER_LOAD_CORES,
    NOISY_STEAL_FRACTION,
    SPREAD_BETWEEN_PROCESSES_CV,
    UNSTABLE_RELATIVE_IQR,
)
from dlbench.measure.noise import LIMIT_MULTIPLE, PROBE_S, SIZE, WARMUP_S
from dlbench.records import provenance
from dlbench.report.display import say, show

df = load(summary)
ok = timed(df)

# %% [markdown]
# ## Measurement quality

# %%
say(f"Every cell keeps all its per-iteration times and gives its median with a 95% "
    "confidence interval (from the order statistics of its samples; with `repeats`, from the "
    "spread of the processes' medians, since samples of different processes are not "
    "independent draws; with `rounds`, from the spread between processes pooled over its "
    "scenario's cells and the drift between rounds). With `target_ci` the timed loop ran "
    "until that interval was within "
    "the target (*stopped by*). Right after each cell's timed loop, its process times a "
    f"fixed workload — its framework's own matrix product, {SIZE}×{SIZE}, on the cell's "
    f"threads — for {PROBE_S:g} s (or `min_duration_s` if shorter), after as long untimed "
    f"(at most {WARMUP_S:g} s: the machine leaving the cell's own work): the spread of that "
    "workload is the machine's own noise at that moment. A cell is flagged **unstable** "
    "when the spread of its iterations (IQR) within a process (in rounds: the median of "
    "its rounds', as the table's IQR column gives it) is "
    f"above {UNSTABLE_RELATIVE_IQR:.0%} of its median and above {LIMIT_MULTIPLE:g} times the "
    "machine's own (a spread that every workload shows is the machine's, said once below, "
    "not the cell's); **noisy machine** "
    f"when the host stole more than {NOISY_STEAL_FRACTION:.0%} of the CPU time during its "
    "timed loop; **busy machine** when other processes kept more than "
    f"{BUSY_OTHER_LOAD_CORES:.2f} of the cores it needed busy (they slow every iteration "
    "alike, so the IQR stays low while the median rises); **spread between processes** when, "
    f"with `repeats`, the processes' medians vary by more than {SPREAD_BETWEEN_PROCESSES_CV:.0%}"
    " (with `rounds`, when its rounds vary by more than that beyond the drift that moved "
    "every cell of a round alike, and more than the run's other cells do: an F-test at 1% "
    "for all its scenario's cells together)"
    "; **interval not reached** when its interval never got within `target_ci` before "
    "`max_duration_s`; and **not one graph** when torch.compile split it or compiled it "
    "again (a compiled generation: after its warm-up). `measurement.retry_noisy` measures "
    "the noise-flagged cells again and keeps the "
    "cleanest attempt; *attempts* counts these and the cell's earlier jobs that failed (a "
    "crash, a job stopped by the scheduler). The supervising process sampled the cell's CPU "
    "use and the machine's load at ~100 Hz while it ran.")

# %%
measured = quality(ok)
if measured is None:
    say("No cell produced a timing, so there is no measurement quality to show.")
else:
    if measured.machine_noise:
        low, middle, high = measured.machine_noise
        say(f"The machine's own noise beside the cells: the fixed workload's IQR was "
            f"{middle:.1%} of its median (the median cell's; {low:.1%} to {high:.1%}).")
    if measured.flagged:
        verb = "is" if measured.flagged == 1 else "are"
        say(f"**{measured.flagged} of {len(ok)} timed cells {verb} flagged:**")
    else:
        say(f"None of the {len(ok)} timed cells is flagged.")
    shown = len(measured.table)
    if not measured.flagged:
        title = ("The least stable timed cells first" if shown == len(ok) else
                 f"The {shown} least stable of the {len(ok)} timed cells (every cell: "
                 "results/summary.csv)")
    elif measured.flagged == shown:
        title = "Flagged cells"
    else:
        title = (f"The {shown} least stable of the {measured.flagged} flagged cells (every "
                 "cell's flags: results/summary.csv)")
    show(measured.table, title, left=[c for c in ("cell", "flag") if c in measured.table])

# %% [markdown]
# ## Start-up cost
#
# Every cell pays a fixed cost before its timed loop: importing the framework, building the model,
# and the first (cold) call, which includes compilation or tracing. The times below are seconds
# since process start at each phase (medians over the cells with a timing), and the duration of
# the cold call itself. Cells measured later in a group's process (`per_group`) paid no import
# and found the framework set up, so only the first cell of each process counts here; one row
# per scenario and model (each its own workload), framework and optimization. A job
# forked by a warm parent (config/README.md) found its framework imported: its columns show
# what the job paid, the last one what the import cost its parent, once. A process measured side
# by side counts from its command's start, its waits for turns left out.

# %%
costs = startup(ok)
if costs is None:
    say("No cell produced a timing, so there is no start-up cost to show.")
else:
    show(blank_repeats(blank_repeats(costs, "scenario"), "model"))
    if (at_once := most_startups_at_once(ok)) > 1:
        say(f"Measured side by side, up to {at_once} processes started up at once: their "
            "imports and building the model ran beside other recipes' and are of a shared "
            "machine; compiling, the cold call and everything after ran alone.")

# %% [markdown]
# ## Reproduce
#
# Everything re-running this matrix takes: the commands (dlbench at the recorded commit, the
# config below saved as `config.yaml`), the config as the workflow read it (its config files
# and any `--config` values merged), and the identities to check a re-run against: the git
# commit, the hash of the files that pin the software (`requirements.txt`, `envs/*.yaml`),
# the hash of every package installed in each framework's environment and the environment
# fingerprint (hardware, libraries, Python; equal fingerprints: comparable results).

# %%
again = reproduce(df, provenance.read(summary))
if again.command is None:
    say("This summary has no provenance beside it (`results/provenance.json`, written by "
        "`dlbench aggregate --provenance`), so the command and the config are not known.")
else:
    say(md_code_block(again.command, "bash"))
    say("**config.yaml**\n\n" + md_code_block(again.config, "yaml"))
show(again.table, "The identities of the code, the software and the environment",
     left=["what", "value"])
