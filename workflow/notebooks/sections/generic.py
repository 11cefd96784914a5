# %% tags=["parameters"]
# The section of a scenario that has no section file of its own: the report sets `scenario`
# here to the scenario's name (and the head's parameters apply). This cell lets the section
# run on its own.
summary = "results/summary.parquet"
scenario = "inference"

# %%
from dlbench.analysis.generic import scenario_table
from dlbench.analysis.summary import load, of_scenario
from dlbench.format import md_code
from dlbench.report.display import say, show

cells = of_scenario(load(summary), scenario)

# %%
say(f"## Scenario {md_code(scenario)}")
say(f"This report has no section of its own for the {md_code(scenario)} scenario: one row per cell "
    "with its parameters, its status, the median and percentiles of its timed iterations "
    "(ms) and its throughput.")
if cells.empty:
    say("The summary has no cell of this scenario.")
else:
    table = scenario_table(cells)
    text = ("framework", "model", "device", "optimization", "status", "reason")
    show(table, f"The {len(cells)} cells of the {scenario} scenario",
         left=[c for c in table if c in text or table[c].map(type).eq(str).all()])
