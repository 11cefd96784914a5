"""The answer first, one table per scenario: per model and input size, the fastest framework
and optimization with a right answer (by the scenario's headline figure: the median, or for
training the wall time per step; dlbench.analysis.summary.headline), by how much over the
runner-up (with the ratio's 95%
interval, a tie where it contains 1), at which precision; each framework's own fastest right
answer beside it; a note where the frameworks' recipes differ in kind (one had a compiled
recipe, another eager only); and how many cells need a look, per kind, with the section
that shows them."""

import pandas as pd

from dlbench import scenarios as registry
from dlbench.analysis import rounds
from dlbench.analysis.attention import same_attention
from dlbench.analysis.flags import flagged, noisy
from dlbench.analysis.status import not_applicable
from dlbench.analysis.summary import axes, of_scenario, scenarios
from dlbench.analysis.uncertainty import TIE, verdict
from dlbench.catalogue.recipes import COMPILED
from dlbench.format import fmt_fixed, framework_name, framework_rank

# The sections that list each kind of cell (their headings, which the report links to).
QUALITY, CORRECTNESS, STATUS = "Measurement quality", "Correctness", "Status overview"
EFFICIENCY = "Efficiency against the machine's limit"
# The column that says when the frameworks' recipes differ in kind.
UNEQUAL = "recipes compared"
# The column that says when the verdict rests on a cell flagged busy, noisy or unstable.
RESTS_ON = "measurement"
# The column of the fastest cell's time: the median, or the wall time per iteration where
# every cell of the scenario has it; in rounds, either's geometric mean over the rounds
# (dlbench.analysis.summary.headline).
MEDIAN, WALL = "median ms", "ms per iteration, over wall time"
_OVER_ROUNDS = " (rounds' geometric mean)"


def time_column(cells: pd.DataFrame) -> str:
    if not len(cells):
        return MEDIAN
    name = WALL if cells["headline_wall"].all() else MEDIAN
    return name + _OVER_ROUNDS if cells["headline_level"].all() else name


def is_time_column(column: str) -> bool:
    return column.removesuffix(_OVER_ROUNDS) in (MEDIAN, WALL)


def _name(row) -> str:
    return f"{framework_name(row.framework)} {row.optimization}"


def _by(faster: float, low: float, high: float, rounds: int = 0) -> str:
    """'1.25× (1.10–1.40)', 'tie: 1.02× (0.95–1.10)' or '1.25× (no interval)'; with
    rounds, '1.25× (1.10–1.40, 3 rounds)'."""
    text = f"{faster:.2f}×"
    if pd.isna(low) or pd.isna(high):
        return f"{text} (no interval)"
    paired = f", {rounds} rounds" if rounds else ""
    interval = f"{text} ({fmt_fixed(low)}–{fmt_fixed(high)}{paired})"
    return f"{TIE}: {interval}" if verdict(low, high, "slower", "faster") == TIE else interval


def _slower_by(slower, best, spread: rounds.Spread | None = None) -> str:
    """How much slower `slower` is than `best` (two cells), with the interval: paired
    round by round where both were measured in the same rounds (dlbench.analysis.rounds),
    else from the two headline figures' intervals (dlbench.analysis.summary.headline)."""
    return _by(*rounds.ratio_of(slower._asdict(), best._asdict(), spread))


def _correct(row) -> str:
    """✓ (checked, right), 'accuracy undecided' (a trained cell whose accuracy match
    reached no verdict: too few seeds or test images), 'compared, not judged' (an output
    compared with the reference that its precision does not require to equal it, e.g.
    bf16's greedy tokens) or 'not checked'."""
    if row.checked:
        return "✓"
    accuracy = getattr(row, "accuracy_verdict", None)
    if isinstance(accuracy, str):  # trained: the accuracy match reached no verdict
        return f"accuracy {accuracy}"
    compared = getattr(row, "correctness_reference", None)
    return "compared, not judged" if isinstance(compared, str) else "not checked"


def best_of(name: str) -> str:
    """The column of a framework's own fastest right answer."""
    return f"{framework_name(name)}'s best"


def kind(scenario: str, optimization: str) -> str | None:
    """'eager' or 'compiled', as the scenario's recipe registry declares it (None: unknown)."""
    known = registry.scenarios()
    return known[scenario].recipe_kind(optimization) if scenario in known else None


def compiled_recipes(scenario: str, right: pd.DataFrame) -> dict[str, list[str]]:
    """{framework: its right answers' optimizations whose recipe is compiled} (the kind
    from the scenario's recipe registry), for the frameworks with a recipe of known kind."""
    kinds = right.assign(kind=[kind(scenario, o) for o in right["optimization"]])
    return {framework: sorted(set(cells.loc[cells["kind"].eq(COMPILED), "optimization"]))
            for framework, cells in sorted(kinds.groupby("framework"),
                                           key=lambda item: framework_rank(item[0]))
            if cells["kind"].notna().any()}


def unequal_recipes(compiled: dict[str, list[str]]) -> str:
    """'' where every framework had a compiled recipe, or none had; else what each had,
    e.g. '⚠ unequal: PyTorch eager only; TensorFlow compiled (graph)'."""
    if len({bool(c) for c in compiled.values()}) < 2:
        return ""
    return "⚠ unequal: " + "; ".join(
        f"{framework_name(f)} " + (f"compiled ({', '.join(c)})" if c else "eager only")
        for f, c in compiled.items())


def unequal_attention(right: pd.DataFrame) -> str:
    """'' where the right answers ran one attention implementation, or none is recorded;
    else each framework's, e.g. '⚠ unequal attention: PyTorch sdpa; TensorFlow eager'
    (PyTorch's SDPA skips an all-ones mask that the explicit attention of the others
    applies: not the same work)."""
    if "attention_implementation" not in right:
        return ""
    used = {framework: sorted(set(cells["attention_implementation"].dropna()))
            for framework, cells in right.groupby("framework")}
    used = {framework: names for framework, names in used.items() if names}
    if len({tuple(names) for names in used.values()}) < 2:
        return ""
    return "⚠ unequal attention: " + "; ".join(
        f"{framework_name(f)} {', '.join(used[f])}" for f in sorted(used, key=framework_rank))


def rests_on_flagged(compared: pd.DataFrame) -> str:
    """'' where the cells a verdict compares (the fastest and the runner-up) carry no noise
    flag (busy or noisy machine, unstable, spread between processes, interval not reached);
    else which of them do: the verdict rests on a flagged measurement."""
    names = [_name(row) for row in compared[noisy(compared)].itertuples()]
    return f"⚑ rests on flagged cells: {', '.join(names)} (see {QUALITY})" if names else ""


def _framework_best(cells: pd.DataFrame, best, spread: rounds.Spread | None) -> str:
    """A framework's fastest right answer among cells (sorted, fastest first): its
    optimization, precision and headline time, and how much slower than the overall
    fastest."""
    if cells.empty:
        return "— (no timing)"
    right = cells[~disqualified(cells)]
    if right.empty:
        return "— (wrong answers only)"
    own = next(right.itertuples())
    text = f"{own.optimization} ({own.precision}): {fmt_fixed(own.headline_ms, 3)} ms"
    return f"{text}, the fastest" if own.Index == best.Index else \
        f"{text}, {_slower_by(own, best, spread)}"


def disqualified(cells: pd.DataFrame) -> pd.Series:
    """The cells that can never win: a wrong answer, or a time above a physical limit (the
    machine's peak or the cell's own framework's matrix product: `above_ceiling`, set by
    dlbench.analysis.efficiency.with_ceilings where the report has the peaks)."""
    out = cells["wrong_answer"].astype(bool)
    if "above_ceiling" in cells:
        out = out | cells["above_ceiling"].fillna(False).astype(bool)
    return out


def _why_not(row) -> str:
    return "⚠ above its ceiling" if getattr(row, "above_ceiling", False) is True \
        and not row.wrong_answer else "✗"


def _row(scenario: str, group: pd.DataFrame, frameworks: list[str], time: str,
         spread: rounds.Spread | None = None) -> dict:
    """The answer for one model and input size (group: its timed cells, fastest first;
    time: the column of the fastest's time; spread: its scenario's between rounds), among
    the cells that ran the attention every framework ran (analysis.attention)."""
    # The common attention is the right answers' (a wrong cell decides nothing).
    right_of_common = same_attention(group[~disqualified(group)])
    group = group[group.index.isin(right_of_common.index) | disqualified(group)]
    out = disqualified(group)
    right = group[~out]
    if right.empty:
        row = {"fastest": "— (no right answer)", "precision": "", time: "",
               "correct": "", "by how much": "", "runner-up": ""}
    else:
        best = next(right.itertuples())
        row = {"fastest": _name(best), "precision": best.precision,
               time: fmt_fixed(best.headline_ms, 3), "correct": _correct(best)}
        if len(right) > 1:
            second = list(right.itertuples())[1]
            row["by how much"] = _slower_by(second, best, spread)
            row["runner-up"] = f"{_name(second)} ({second.precision})"
        else:
            row |= {"by how much": "the only right answer", "runner-up": "—"}
    row[UNEQUAL] = " · ".join(filter(None, [unequal_recipes(compiled_recipes(scenario, right)),
                                            unequal_attention(right)]))
    row[RESTS_ON] = rests_on_flagged(right.head(2))
    for framework in frameworks:
        row[best_of(framework)] = "" if right.empty else _framework_best(
            group[group["framework"].eq(framework)], best, spread)
    faster_wrong = group[out & (
        group["headline_ms"] < (right["headline_ms"].min() if len(right) else float("inf")))]
    row["faster but wrong"] = ", ".join(f"{_why_not(r)} {_name(r)}"
                                        for r in faster_wrong.itertuples())
    return row


def winners(frame: pd.DataFrame, several_devices: bool = False) -> dict[str, pd.DataFrame]:
    """{scenario: its answer}, one row per model (device) and input size (the scenario's
    axes, integers where they are) with a timed cell: the fastest framework and
    optimization among the cells whose answer is not wrong (unprofiled), its precision and
    headline time (ms: the median, or training's wall time per step, summary.headline), its
    correctness (✓, or 'not checked'), the runner-up and how much slower it is (the
    runner-up's time over the fastest's with its 95% interval — paired round by round in a
    run with rounds, with the rounds it rests on (dlbench.analysis.rounds) —; 'tie' where
    that contains 1); where one framework's right answers include a compiled recipe and
    another's do not (`unequal_recipes`), a note saying so; each framework's own fastest right
    answer ('<framework>'s best'); and the faster cells that computed a wrong answer (✗)
    or were timed above a ceiling (⚠, `above_ceiling`): they do not win. A column empty
    in every row is left out."""
    answers = {}
    timed = _compared(frame)
    spreads = rounds.run_spreads(timed)
    for scenario in scenarios(timed):
        cells = of_scenario(timed, scenario)
        sizes = [a for a in axes(scenario) if a in cells]
        keys = ["model"] + (["device"] if several_devices else []) + sizes
        frameworks = sorted(cells["framework"].unique(), key=framework_rank)
        time = time_column(cells)
        spread = spreads.get(scenario)
        rows = [{**dict(zip(keys, values, strict=True)),
                 **_row(scenario, group.sort_values("headline_ms"), frameworks, time, spread)}
                for values, group in cells.groupby(keys, sort=True)]
        if not rows:  # no cell with every key (a scenario's cells without a model)
            continue
        table = pd.DataFrame(rows)
        empty = [c for c in table.columns if c not in keys and table[c].eq("").all()]
        answers[scenario] = table.drop(columns=empty)
    return answers


def _compared(frame: pd.DataFrame) -> pd.DataFrame:
    """The cells the answer compares: timed, not profiled."""
    return frame[frame["timed"] & ~frame["profiled"]]


def width_notes(frame: pd.DataFrame) -> dict[str, str]:
    """{scenario: what its answer's ratios' intervals span at the run's spread between
    processes and how many rounds would put them within ±10% (rounds.width_note; '' where
    they are)}."""
    from dlbench import scenarios as registry

    known = registry.scenarios()
    return {name: rounds.width_note(spread, known[name].rounds_key)
            for name, spread in rounds.run_spreads(_compared(frame)).items() if name in known}


def attention(frame: pd.DataFrame, above_peak: int = 0) -> pd.DataFrame:
    """The cells that need a look, per kind: kind, cells, and the section that lists them
    (only kinds with at least one cell). Unstable or flagged: timed cells the harness
    flagged; wrong answer: outside its precision's tolerance; failed: status error; out of
    memory; unsupported (on this device or model); not applicable by design (the other
    framework's optimization), counted once and listed nowhere as a failure; above the
    machine's peak: `above_peak` cells (dlbench.analysis.efficiency), a measurement
    problem."""
    by_design = not_applicable(frame)
    kinds = [
        ("unstable or flagged", int((frame["timed"] & flagged(frame)).sum()), QUALITY),
        ("wrong answer", int((frame["timed"] & frame["wrong_answer"]).sum()), CORRECTNESS),
        ("above a ceiling (the machine's peak or its own GEMM)", above_peak, EFFICIENCY),
        ("failed (error)", int(frame["status"].eq("error").sum()), STATUS),
        ("out of memory", int(frame["status"].eq("oom").sum()), STATUS),
        ("unsupported", int((frame["status"].eq("unsupported") & ~by_design).sum()), STATUS),
        ("not applicable by design", int(by_design.sum()), STATUS),
    ]
    return pd.DataFrame([k for k in kinds if k[1]], columns=["kind", "cells", "section"])
