"""Scenarios: what a cell measures (a transformer's forward pass, a training run, …).

A scenario is one module that declares everything the rest of dlbench asks of it: its
size axes and how they read in a cell id, which models and optimizations apply (and why
not, where not), its config section and its part of the result schema, the files its
cells read, how one cell is measured, how repeats of a cell combine, the summary sections
it adds; its report section is `workflow/notebooks/sections/<name>.py` (a scenario without
one gets the generic section). The runner, the supervisor and the workflow's rules know
no scenario by name.

Scenarios register themselves here. Besides the built-in ones, the Python files named in
the environment variable DLBENCH_PLUGINS (separated by ':') are loaded and may register
more: a way to try a new scenario without changing dlbench.
"""

import copy
import itertools
import statistics
from dataclasses import dataclass
from typing import Any, ClassVar

from dlbench.catalogue import frameworks as catalogue
from dlbench.catalogue import recipes
from dlbench.catalogue.axes import FRAMEWORKS
from dlbench.measure.flags import cell_flags, highest
from dlbench.measure.stats import between_processes, relative_half_width, summarize
from dlbench.scenarios.cell import Cell
from dlbench.scenarios.codec import Codec

# The registry's API, read here as before it had its own module.
from dlbench.scenarios.registry import (  # noqa: F401
    _REGISTRY,
    BUILT_IN,
    PLUGINS_VARIABLE,
    get,
    register,
    scenarios,
)


@dataclass(frozen=True)
class Axis:
    """A size axis of a scenario: one value per cell, a list of values in the config."""

    name: str  # the cell parameter, summary column and `dlbench run --<name>` option
    config_key: str  # the list of its values in the scenario's config section
    id_prefix: str  # how a value reads in a cell id: "b" → b8
    description: str
    type: type = int
    choices: tuple[str, ...] = ()  # the values allowed (text axes) …
    pattern: str = "^[a-z0-9-]+$"  # … or the form they must have
    expected: str = ""  # that form in words, for messages …
    examples: tuple[str, ...] = ()  # … and names of that form, to suggest the closest

    def schema(self) -> dict:
        """Its values' JSON schema: the config's list items, and `dlbench run --<name>`'s
        values (dlbench.scenarios.codec)."""
        if self.type is int:
            return {"type": "integer", "minimum": 1}
        if self.choices:
            return {"type": "string", "enum": list(self.choices)}
        words = {"x-expected": self.expected, "x-examples": list(self.examples)} \
            if self.expected else {}
        return {"type": "string", "pattern": self.pattern, **words}


class Scenario:
    """The base of every scenario: sensible defaults, so that a new scenario declares its
    names and axes and implements `measure`."""

    name: ClassVar[str]
    description: ClassVar[str]
    axes: ClassVar[tuple[Axis, ...]] = ()
    # May one process measure a group of cells (those differing only in their sizes)?
    # Where start-up dominates, as for short inference cells (measurement.process).
    groupable: ClassVar[bool] = False
    # Result sections of this scenario that become summary columns: section → column prefix.
    summary_sections: ClassVar[dict[str, str]] = {}
    # What its comparisons (the answer, the speed-ups) rank its cells by: "median", the
    # median iteration; or "wall", the work over the wall time of the timed iterations, as
    # time per iteration — for iterations that come in bursts, such as training steps fed
    # by loader workers, whose median falls in one cluster of steps or between two
    # (dlbench.analysis.summary.headline).
    headline: ClassVar[str] = "median"
    # The operations it asks of a framework (a Protocol, e.g. inference_ops.InferenceOps):
    # each registered framework's dlbench.frameworks.<name>.<scenario> implements it.
    ops_interface: ClassVar[type | None] = None

    def models(self) -> list[str]:
        """The model names a config may give this scenario."""
        raise NotImplementedError

    def optimizations(self) -> list[str]:
        """The optimization names a config may give this scenario: those the frameworks
        declare for it (dlbench.catalogue.recipes)."""
        return list(recipes.optimizations(self.recipes_of))

    def recipe_kind(self, optimization: str) -> str | None:
        """How an optimization's recipe runs: 'eager' (op by op) or 'compiled' (a trace, a
        graph, Inductor, XLA); None for a name the recipe registry does not know."""
        known = recipes.optimizations(self.recipes_of).get(optimization)
        return known.recipe.kind if known else None

    def precision(self, optimization: str) -> str:
        """The precision a cell of this optimization computes in: the registry's, fp32 for
        an optimization that is no recipe of the registry's (a plugin's)."""
        known = recipes.optimizations(self.recipes_of).get(optimization)
        return known.precision.name if known else "fp32"

    @property
    def recipes_of(self) -> str:
        """The scenario whose declared recipes this one runs: its own (a variant of a
        scenario, e.g. a plugin's subclass under another name, overrides it)."""
        return self.name

    # -- the matrix ------------------------------------------------------------------------

    def settings_schema(self) -> dict:
        """JSON-schema properties (with defaults) of the section's keys that are settings of
        every cell rather than axes (training: epochs, learning rates, …): declared once,
        carried to the cell's process by dlbench.scenarios.codec."""
        return {}

    def settings_codec(self) -> Codec:
        return Codec(self.settings_schema(), context=f"{self.name}: ")

    def axes_codec(self) -> Codec:
        """The size axes as `dlbench run` options: one value per cell, several per group."""
        return Codec({axis.name: {**axis.schema(), "description": axis.description}
                      for axis in self.axes}, many=True)

    def setting_args(self, section: dict, cell: "Cell") -> list[str]:
        """`dlbench run` options carrying the section's settings to one cell's job."""
        return self.settings_codec().to_args(section, cell)

    def add_setting_options(self, parser) -> None:
        """Add the options that `setting_args` writes to `dlbench run`."""
        self.settings_codec().add_options(parser)

    def settings_from_args(self, args, cell: "Cell") -> dict:
        """The cell settings from `dlbench run`'s options (recorded with each cell)."""
        return self.settings_codec().from_args(args, cell)

    def measurement_settings(self, settings: dict) -> dict:
        """What a cell is measured with, from its measurement and scenario settings (a
        scenario may derive one from another)."""
        return settings

    def rounds(self, config: dict) -> int:
        """In how many of the run's rounds (measurement.rounds) this scenario's cells are
        measured, each round in fresh processes: all of them by default."""
        return config["measurement"]["rounds"]

    # The config key that sets `rounds`, for the report's advice on how many would do.
    rounds_key = "measurement.rounds"

    def validate(self, config: dict) -> list[str]:
        """Problems of a validated config that its schema cannot see (a missing folder)."""
        return []

    def config_schema(self) -> dict:
        """The JSON schema of this scenario's config section."""
        properties = {
            "models": _names("model names (`dlbench list`)", self.models()),
            "optimizations": _per_framework(_names("optimization names (`dlbench list`)",
                                                   self.optimizations())),
        }
        for axis in self.axes:
            properties[axis.config_key] = {"description": axis.description, "type": "array",
                                           "minItems": 1, "uniqueItems": True,
                                           "items": axis.schema()}
        required = list(properties)
        properties.update(self.settings_schema())
        return {"description": self.description, "type": "object",
                "additionalProperties": False, "required": required,
                "properties": properties}

    def cells(self, section: dict, frameworks: list[str], devices: list[str]) -> list["Cell"]:
        """Every combination of the section's axes, in config order."""
        names = [axis.name for axis in self.axes]
        return [
            Cell(self.name, framework, model, device, optimization,
                 tuple(zip(names, sizes, strict=True)))
            for framework in frameworks
            for model, device, *sizes, optimization in itertools.product(
                section["models"], devices, *(section[axis.config_key] for axis in self.axes),
                optimizations_for(section, framework))
        ]

    def id_head(self, cell: "Cell") -> str:
        """The part of a cell id before its sizes (cells of one group share it)."""
        return f"{self.name}_{cell.framework}_{cell.model}_{cell.device}"

    def id_tail(self, cell: "Cell") -> str:
        """The part of a cell id after its sizes (cells of one group share it)."""
        return cell.optimization

    def unsupported_reason(self, cell: "Cell") -> str | None:
        """Why this cell cannot apply, known without running it (None if it can)."""
        return None

    def protocol(self, cell: "Cell") -> int:
        """The revision of how this cell is measured: 1 as first released, raised when
        what the cell measures changes (see Cell.cli_args)."""
        return 1

    # -- the files a cell reads (built once by the workflow's rules) ------------------------

    def inputs(self, cell: "Cell") -> dict[str, str]:
        """The shared files the cell reads, by name (rules of the workflow make them)."""
        return {}

    def input_args(self, cells: list["Cell"], inputs: dict[str, Any], group: bool) -> list[str]:
        """`dlbench run` options naming the inputs of one job's cells (a group's, or one)."""
        return []

    def add_input_options(self, parser) -> None:
        """Add this scenario's input options to `dlbench run`."""

    def task_inputs(self, args, cell: "Cell") -> dict[str, str | None]:
        """The inputs of one cell from `dlbench run`'s options (recorded in its settings)."""
        return {}

    # -- measuring, in the measuring process ----------------------------------------------

    def measure(self, backend, cell: "Cell", settings: dict, clock, inputs: dict) -> dict:
        """The cell's result sections (timing, throughput, …), or its status and reason
        where only the device can tell that it cannot run."""
        raise NotImplementedError

    def combine(self, records: list[dict]) -> dict:
        """One record from a cell's repeats (fresh processes): the samples pooled, the
        spread between the processes, and the 95% interval of the median from that
        spread (samples of different processes are not independent draws). A new record,
        built on a copy of the first: the repeats are left as they are."""
        final = copy.deepcopy(records[0])
        if len(records) == 1 or final["status"] != "ok":
            return final
        timing = final["timing"]
        repeats = [{key: r["timing"][key] for key in
                    ("median_ms", "iqr_ms", "iterations", "cold_start_s")} for r in records]
        samples = [x for r in records for x in r["timing"]["samples_ms"]]
        if "device_time" in timing:
            device = [x for r in records for x in r["timing"]["device_time"]["samples_ms"]]
            timing["device_time"].update(summarize(device), samples_ms=device)
        pooled = summarize(samples)
        spread = between_processes([r["median_ms"] for r in repeats], pooled["median_ms"])
        low, high = spread["median_ci95_ms"]
        within_low, within_high = pooled["median_ci95_ms"]
        interval = [min(low, within_low), max(high, within_high)]  # never narrower
        stopped = {r["timing"].get("stopped_by") for r in records}
        timing.update(pooled, samples_ms=samples, iterations=len(samples),
                      loop_s=sum(r["timing"]["loop_s"] for r in records), repeats=repeats,
                      between_processes=spread, median_ci95_ms=interval,
                      median_ci95_half_width=relative_half_width(pooled["median_ms"], *interval),
                      median_ci95_coverage=None,
                      median_ci95_method=f"between {len(records)} processes: the pooled "
                      "median ± t·s/√k of their medians (at least the pooled samples' interval)")
        if "max_duration" in stopped:  # timed loops only (a training cell's steps have none)
            timing["stopped_by"] = "max_duration"
        # The memory figures of one process (each figure's largest over the processes mixed
        # processes whose cell sat at different places in its group): one where the cell
        # was the first of its process if any, for a later cell's process still holds what
        # the earlier cells left; of those, the one with the highest peak.
        # `memory.first_in_process` says which it is.
        firsts = [r for r in records if (r.get("process") or {}).get("position", 0) == 0]
        chosen = max(firsts or records, key=lambda r: r["memory"].get("peak_host_rss_mb") or 0)
        final["memory"] = {**copy.deepcopy(chosen["memory"]), "first_in_process": bool(firsts)}
        windows = [r.get("utilization") for r in records]
        nvml = [w["gpu_process_memory_peak_mb"] for w in windows
                if w and w.get("gpu_process_memory_peak_mb") is not None]
        if nvml and final.get("utilization"):
            final["utilization"]["gpu_process_memory_peak_mb"] = max(nvml)
        # The load beside the cell as its flags judge it (every process's window): the
        # highest, not the first process's alone.
        for key in ("other_load_cores", "steal_fraction"):
            if final.get("utilization") and (most := highest(windows, key)) is not None:
                final["utilization"][key] = most
        noises = [r["machine_noise"] for r in records if r.get("machine_noise")]
        if noises:  # the machine's own noise beside each process: their median
            final["machine_noise"] = {
                **noises[0], "processes": [n["relative_iqr"] for n in noises],
                "relative_iqr": statistics.median(n["relative_iqr"] for n in noises)}
        final["flags"] = cell_flags(final, windows, between_cv=spread["cv"])
        return final

    # -- the work of a timed iteration (the report's efficiency section) ---------------------

    def iteration_flops(self, model: str, sizes: dict[str, int]) -> float | None:
        """FLOPs of what one timed iteration computes, from the architecture
        (dlbench.measure.flops), for the cell's model and sizes (its axes' values); None
        where the scenario or the model has no count."""
        return None

    def flops_phases(self, model: str, sizes: dict[str, int]) -> list[tuple[str, float, str]]:
        """The phases of a timed iteration that the record times apart, each as (name,
        FLOPs of one occurrence, the summary column of its median time in ms), for their
        own rates in the efficiency section; none by default."""
        return []

    # -- results ---------------------------------------------------------------------------

    def result_schema(self) -> dict:
        """This scenario's part of the result schema: `params` (its axes) and, under
        `properties`, the sections it writes (applied to its records only)."""
        return {"params": {axis.name: axis.schema() for axis in self.axes}, "properties": {}}


def median_over(values: list):
    """One figure for what every round recorded of it (not the first round's alone): the
    median of numbers (with two, their mean; the value itself where they agree), of lists
    of one length position by position, of dicts key by key; the first round's where the
    rounds' values are of other kinds, missing in one or of other lengths."""
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return statistics.median(values)
    if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
        return [median_over(list(column)) for column in zip(*values, strict=True)]
    if all(isinstance(v, dict) for v in values):
        return {key: median_over([v.get(key) for v in values]) for key in first}
    return first


def optimizations_for(section: dict, framework: str) -> list[str]:
    """The optimizations a section names for a framework: its one list (every framework),
    or the framework's own list (none where the mapping leaves it out)."""
    named = section["optimizations"]
    return list(named.get(framework, [])) if isinstance(named, dict) else list(named)


def optimization_problems(section: dict, frameworks: list[str],
                          scenario: str | None = None) -> list[str]:
    """Optimizations named per framework: every framework of the matrix that measures the
    scenario needs its list, and every list a framework of the matrix."""
    named = section["optimizations"]
    if not isinstance(named, dict):
        return []
    missing = [f for f in frameworks if f not in named
               and (scenario is None or catalogue.get(f).measures(scenario))]
    extra = [f for f in named if f not in frameworks]
    return ([f"optimizations: no list for {', '.join(missing)} (name its optimizations, or "
             "give one list for every framework)"] if missing else []) + (
        [f"optimizations: {', '.join(extra)} is not in frameworks"] if extra else [])


def _per_framework(names: dict) -> dict:
    """One list for every framework, or a list per framework."""
    return {"description": f"{names['description']}: one list for every framework, or a "
            "list per framework ({pytorch: [eager, compile], tensorflow: [eager, xla]})",
            "oneOf": [names, {"type": "object", "additionalProperties": False,
                              "minProperties": 1,
                              "properties": {f: names for f in FRAMEWORKS}}]}


def _names(description: str, names: list[str]) -> dict:
    return {"description": description, "type": "array", "minItems": 1, "uniqueItems": True,
            "items": {"type": "string", "enum": list(names)}}
