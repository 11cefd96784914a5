"""Training cells: does each framework train the CNN to the same accuracy (the proof that
the models are the same), how fast, where a step's time goes, and how long to a target
accuracy.

The accuracy match compares like with like: cells that should reach the same accuracy (the
same model, data set, batch, optimizer, learning rate and epochs) at the same precision —
every fp32 recipe of a framework together (pipelines and fp32 optimizations must not change
what is learned), each reduced precision apart. Each side's accuracy is the mean over its
trained models (cells × seeds). Every cell and seed trains a model of its own, and the
models' spread is the error between two sides' means (read on one test set, it holds the
test set's noise too). It is estimated image by image where every model's record says which
test images it got wrong: if the frameworks train the same model (what a match claims),
every model of the group is a draw from one distribution, and a model trained to a plateau
gets each image wrong independently of the others (the image's chance p_i over training
runs), so one model's accuracy varies by Σ p_i (1 − p_i) / n² — estimated from the shares
of the models right on each image (× K / (K − 1) over K models): n terms, where the seeds'
own spread has few degrees of freedom (two seeds a side, three frameworks: 3, Student's t
8.6). Where every framework trained the same seeds, each seed is a stratum of its own
(`_image_noise`): a seed's initial weights are every framework's. Measured on the default's
CNN after 4 epochs (bench/accuracy_power.py, config/README.md): the seeds' spread 0.3-0.7
points, the image-by-image estimate 0.5-0.6. Models still learning vary as a whole (the
digits with flips after 3 epochs: 82.5–91.4% over six seeds, where images alone allow ≤ 1.8
points): where the models spread about framework and seed more than the image-by-image
variance allows (χ² at CONFIDENCE), or a record lacks the images, the seeds' spread is the
error (Student's t at its pooled degrees of freedom, a pooled two-sample t-test); with one
model a side and no images, the binomial error p(1−p)/n. The statistical tolerance is the
difference's half-width at CONFIDENCE for the group as a whole (Bonferroni over its pairs:
three frameworks, three pairs). A mismatch is an accusation that costs cells their place in
the answer, so it is made at 99%. The check of the independence has few degrees of freedom
at the default (three frameworks × two seeds: 2), so models that vary as a whole by a
little more than the images allow can pass it and widen the difference beyond the
tolerance's account; the configured tolerance then guards: a mismatch needs the difference
beyond it. The configured `accuracy_tolerance` is the size of a
difference that matters: where the statistical tolerance is within it, the comparison can
see such a difference — within the configured tolerance a match, beyond it a mismatch;
where the noise is wider, a difference beyond the noise is a mismatch all the same (one
seed a side can tell), and one inside it is *undecided* — not a match: the cells could
differ by more than the configured tolerance and no test of this size would show it. A
group is as good as its worst pair. A mismatch accuses the fewest frameworks whose removal
leaves two or more that no longer mismatch, where one such set exists and is outnumbered by
the rest (three frameworks, one off: that one); else every framework of a mismatched pair
(two sides cannot tell which of them differs). A framework not accused keeps the verdict
of its pairs with the others not accused. A mismatched cell is counted like a wrong answer
in inference (`correctness_within_tolerance` false, set by `correctness`): its speed does
not count; an undecided one is not checked (None).
"""

from collections import Counter
from fractions import Fraction
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import chi2, norm
from scipy.stats import t as student

from dlbench.analysis.speedup import valid_speedup
from dlbench.format import fmt_ms, framework_name, framework_rank

GROUP = ["model", "dataset", "batch", "optimizer", "training_learning_rate",
         "training_epochs", "training_decay_epochs", "precision"]
MATCH, MISMATCH, UNKNOWN, UNDECIDED = "match", "mismatch", "not established", "undecided"
# A group's verdict is its worst pair's.
_SEVERITY = {MATCH: 0, UNDECIDED: 1, UNKNOWN: 2, MISMATCH: 3}
# The confidence of a group's verdict (two-sided, shared among its pairs).
CONFIDENCE = 0.99
# Where the statistical tolerance's error came from (`_pair`), for reading: the models'
# spread image by image or seed by seed, or the test set's binomial error.
NOISE = {"images": "by image", "seeds": "by seed", "binomial": "binomial"}


def cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The training cells that ran, with their accuracy figures."""
    return frame[frame["timed"] & frame["training_final_accuracy"].notna()]


def _decay_known(trained: pd.DataFrame) -> pd.DataFrame:
    """A record from before the learning rate decayed trained at a constant one: 0 epochs
    decaying."""
    decay = trained.get("training_decay_epochs", pd.Series(0, index=trained.index))
    return trained.assign(training_decay_epochs=decay.fillna(0).astype(int))


def _listed(value) -> list | None:
    return list(value) if isinstance(value, list | np.ndarray) and len(value) else None


def _seeds(row) -> dict[int, float]:
    """The cell's final accuracy per seed (seed → accuracy)."""
    accuracies = _listed(row.get("training_final_accuracies")) or [
        row["training_final_accuracy"]]
    seeds = _listed(row.get("training_seeds"))
    if seeds is None:
        first = row.get("training_seed")
        first = 0 if first is None or pd.isna(first) else int(first)
        seeds = range(first, first + len(accuracies))
    return {int(s): float(a) for s, a in zip(seeds, accuracies, strict=True)}


def _wrong(row) -> list[set[int]] | None:
    """The test images each of the cell's seeds got wrong (None from a record without)."""
    per_seed = _listed(row.get("training_wrong_images_per_seed"))
    if per_seed is None or any(w is None or np.isscalar(w) for w in per_seed):
        return None
    return [{int(i) for i in w} for w in per_seed]


def _side(group: pd.DataFrame) -> dict:
    """One framework's side of a comparison: its mean accuracy, seeds, the binomial
    variance of its mean (NaN without the test set's size), its trained models' accuracies
    and the test images each got wrong (None where a record lacks them)."""
    # A seed's cells (eager, graph, …) read one test set: its binomial error counts once.
    # But each is a model trained of its own, and they do not end alike (seen: 80.2% and
    # 89.7% for TensorFlow's eager and graph cells of one seed after 3 epochs): every one
    # of them is a run of the models' spread.
    trained = [_seeds(row) for _, row in group.iterrows()]
    runs = np.array([accuracy for each in trained for accuracy in each.values()])
    seeds = [seed for each in trained for seed in each]
    wrong = [_wrong(row) for _, row in group.iterrows()]
    wrong = None if any(w is None for w in wrong) else [w for each in wrong for w in each]
    mean = float(runs.mean())
    k = len({seed for each in trained for seed in each})
    images = group["training_test_images"].min() if "training_test_images" in group else None
    binomial = (mean * (1 - mean) / (images * k)
                if images is not None and pd.notna(images) else np.nan)
    return {"accuracy": mean, "seeds": k, "binomial": binomial, "runs": runs,
            "seed_of": seeds,
            "wrong": wrong if wrong is not None and len(wrong) == len(runs) else None,
            "images": images}


def _models_variance(sides: list[dict]) -> tuple[float, int]:
    """The trained models' variance pooled over the sides (each about its own mean) and its
    degrees of freedom (0 where no side has two models: unknown)."""
    dof = sum(len(side["runs"]) - 1 for side in sides)
    squares = sum(float(np.sum((side["runs"] - side["accuracy"]) ** 2)) for side in sides)
    return (squares / dof if dof else np.nan), dof


def _image_noise(sides: dict[str, dict]) -> dict[str, float] | None:
    """Each side's mean's variance from the models' spread estimated image by image
    (module docstring), or None where it cannot be used: a model without its wrong images,
    cells tested on sets of different sizes, a stratum with one model, or models that vary
    as a whole (`_spread_within`). Where every side trained the same seeds in the same
    shares (as a run does: seeds 0, 1, … in every framework) the seeds are strata — a
    seed's initial weights are every framework's, and its models end alike more than those
    of two seeds do (seen: 99.2-99.4% for seed 0 in every framework, 97.8-98.1% for seed
    1) —, so that the variance is each seed's own and the seeds' differences cancel in the
    comparison; else one stratum. A framework's cells of one seed (its recipes) start alike
    too: they are one unit, each image's share of them right its outcome."""
    if any(side["wrong"] is None for side in sides.values()):
        return None
    images = {side["images"] for side in sides.values()}
    n = images.pop() if len(images) == 1 else None
    if n is None or pd.isna(n) or any(i >= n for side in sides.values()
                                       for wrong in side["wrong"] for i in wrong):
        return None
    n = int(n)
    shares = {fw: Counter(side["seed_of"]) for fw, side in sides.items()}
    proportions = [{seed: Fraction(c, share.total()) for seed, c in share.items()}
                   for share in shares.values()]
    paired = all(each == proportions[0] for each in proportions)
    first = shares[next(iter(sides))]
    # Units: a framework's models of one seed — each image's share of them right, their
    # mean accuracy.
    units = []
    for fw, side in sides.items():
        for seed in shares[fw]:
            right = np.ones(n)
            mine = [w for s, w in zip(side["seed_of"], side["wrong"], strict=True) if s == seed]
            for wrong in mine:
                right[list(wrong)] -= 1 / len(mine)
            units.append((fw, seed, right))
    variance = {}
    for stratum in (first if paired else [None]):
        rights = np.array([u[2] for u in units if not paired or u[1] == stratum])
        k = len(rights)
        if k < 2:
            return None
        # At least one image that one unit of the K missed: units that all missed the same
        # images still differ by chance, if rarely.
        variance[stratum] = max(float(np.sum(rights.var(axis=0, ddof=1))), 1 / k) / n ** 2
    units = [(fw, seed, float(right.mean()), variance[seed if paired else None])
             for fw, seed, right in units]
    if not _spread_within(units, paired):
        return None
    return {fw: sum(v for f, _, _, v in units if f == fw) / len(shares[fw]) ** 2
            for fw in sides}


def _spread_within(units: list[tuple], paired: bool) -> bool:
    """Whether the units' accuracies (framework, seed, accuracy, variance) spread about
    framework + seed (seed only where `paired`) no more than their image-by-image variances
    allow: the weighted residual sum of squares of the least-squares fit (weights 1/variance)
    against χ² at CONFIDENCE. Models that vary as a whole (undertrained) spread more; a
    framework that differs moves its own mean, not this spread. False where nothing is left
    to check with (no degree of freedom: one seed a side): the estimate is then unchecked,
    and the seeds' spread or the binomial decides."""
    frameworks = sorted({u[0] for u in units})
    seeds = sorted({u[1] for u in units}) if paired else []
    design = np.array([[1.0] + [u[0] == fw for fw in frameworks[1:]]
                       + [u[1] == seed for seed in seeds[1:]] for u in units], dtype=float)
    weight = 1 / np.sqrt([u[3] for u in units])
    accuracy = np.array([u[2] for u in units])
    fitted, *_ = np.linalg.lstsq(design * weight[:, None], accuracy * weight, rcond=None)
    residual = (accuracy - design @ fitted) * weight
    dof = len(units) - np.linalg.matrix_rank(design)
    return dof > 0 and float(np.sum(residual ** 2)) <= chi2.ppf(CONFIDENCE, dof)


def _pair(a: dict, b: dict, configured: float, models: tuple[float, int],
          pairs: int, images: float = np.nan) -> dict:
    """Two sides compared: the difference of their accuracies, the statistical tolerance
    (the difference's half-width at CONFIDENCE shared by `pairs` pairs; `images`: the
    difference's variance from the models' spread image by image, NaN where unknown;
    `models`: the group's pooled models' variance and its degrees of freedom) and the
    verdict."""
    difference = abs(a["accuracy"] - b["accuracy"])
    variance, dof = models
    # Where the models' spread is measured it is the error: read on the same test set, it
    # holds the test set's noise too (adding the binomial would count it twice). Otherwise
    # the binomial error (known: the normal quantile).
    model_term = variance * (1 / len(a["runs"]) + 1 / len(b["runs"])) if dof else 0.0
    binomial = a["binomial"] + b["binomial"]
    level = 1 - (1 - CONFIDENCE) / (2 * pairs)
    if not np.isnan(images):  # estimated over the test images: the normal quantile
        statistical = float(norm.ppf(level) * np.sqrt(images))
        noise = "images"
    elif model_term > 0:
        statistical = float(student.ppf(level, dof) * np.sqrt(model_term))
        noise = "seeds"
    elif binomial > 0:
        statistical = float(norm.ppf(level) * np.sqrt(binomial))
        noise = "binomial"
    else:  # no test-set size and no spread: no noise known
        statistical, noise = np.nan, None
    if np.isnan(statistical):
        verdict = MATCH if difference <= configured else UNKNOWN
    elif statistical <= configured:  # a difference of the size that matters would show
        verdict = MATCH if difference <= configured else MISMATCH
    else:  # the noise is wider than what matters: only a difference beyond it tells
        verdict = MISMATCH if difference > statistical else UNDECIDED
    return {"difference": difference, "statistical": statistical, "verdict": verdict,
            "seeds": min(a["seeds"], b["seeds"]), "noise": noise}


def _pairs(sides: dict[str, dict], configured: float,
           count: int) -> tuple[dict[tuple[str, str], dict], bool]:
    """Every pair of `sides` (in their order) compared by `_pair`, with the error from
    these sides' models alone; and whether it was estimated image by image."""
    models = _models_variance(list(sides.values()))
    noise = _image_noise(sides)
    return {(a, b): _pair(sides[a], sides[b], configured, models, count,
                          noise[a] + noise[b] if noise else np.nan)
            for a, b in combinations(sides, 2)}, noise is not None


def _worst(verdicts) -> str:
    return max(verdicts, key=_SEVERITY.__getitem__)


def _accused(names: list[str], verdicts: dict[tuple[str, str], str]) -> set[str]:
    """The frameworks a mismatch accuses (module docstring): none without a mismatch; the
    one smallest set whose removal leaves two frameworks or more — more than it removes —
    with no mismatched pair among them; else every framework of a mismatched pair."""
    mismatched = [pair for pair, verdict in verdicts.items() if verdict == MISMATCH]
    if not mismatched:
        return set()
    for size in range(1, len(names)):
        if len(names) - size <= size:
            break
        found = [set(removed) for removed in combinations(names, size)
                 if not any(a not in removed and b not in removed for a, b in mismatched)]
        if len(found) == 1:
            return found[0]
        if found:  # as few ways to agree as to disagree: no framework stands out
            break
    return {fw for pair in mismatched for fw in pair}


def _verdict_of(fw: str, accused: set[str], pairs: dict[tuple[str, str], dict]) -> str:
    """A framework's verdict: mismatch if accused; else the worst of its pairs with the
    frameworks not accused (where every other is accused — two of three disagree and
    nothing tells which —, of all its pairs: none of them is a mismatch)."""
    if fw in accused:
        return MISMATCH
    mine = {pair: p["verdict"] for pair, p in pairs.items() if fw in pair}
    kept = [v for pair, v in mine.items() if not accused & set(pair)]
    return _worst(kept or mine.values())


def accuracy_match(trained: pd.DataFrame) -> pd.DataFrame:
    """One row per group of cells that should reach the same accuracy (GROUP, precision
    included): each framework's mean final accuracy, its seeds and its verdict, and every
    pair of frameworks compared; the group's verdict is its worst pair's (a mismatch, else
    not established, else undecided, else a match), and the difference, the configured and
    statistical tolerance and the fewer seeds of its two sides are that pair's (of the pairs
    with the worst verdict, the widest apart). `differs`: the frameworks a mismatch accuses
    (a list; empty without one). A framework's verdict: mismatch if accused, else the worst
    of its pairs with the frameworks not accused."""
    rows = []
    for key, group in _decay_known(trained).groupby(GROUP, sort=True):
        sides = {fw: _side(g) for fw, g in group.groupby("framework")}
        if len(sides) < 2:
            continue
        names = sorted(sides, key=framework_rank)
        configured = float(group["training_accuracy_tolerance"].max())
        count = len(names) * (len(names) - 1) // 2  # the group's pairs, for Bonferroni
        pairs, by_image = _pairs({fw: sides[fw] for fw in names}, configured, count)
        worst = max(pairs.values(), key=lambda p: (_SEVERITY[p["verdict"]], p["difference"]))
        accused = _accused(names, {pair: p["verdict"] for pair, p in pairs.items()})
        kept = {fw: sides[fw] for fw in names if fw not in accused}
        if accused and len(kept) > 1 and by_image:
            # The others' pairs judged by their own models' spread: the accused models'
            # misses widen one estimated over the whole group.
            pairs.update(_pairs(kept, configured, count)[0])
        row = dict(zip(GROUP, key, strict=True))
        row.update({f"{fw} accuracy": sides[fw]["accuracy"] for fw in names})
        row.update({f"{fw} seeds": sides[fw]["seeds"] for fw in names})
        row.update({f"{fw} verdict": _verdict_of(fw, accused, pairs) for fw in names})
        # A pair of the others judged again by their own spread can mismatch too: named.
        accused |= {fw for fw in names if row[f"{fw} verdict"] == MISMATCH}
        row.update(difference=worst["difference"], configured=configured,
                   statistical=worst["statistical"], verdict=worst["verdict"],
                   seeds=worst["seeds"], noise=worst["noise"],
                   differs=[fw for fw in names if fw in accused])
        rows.append(row)
    return pd.DataFrame(rows)


def match_table(match: pd.DataFrame) -> pd.DataFrame:
    """`accuracy_match` for reading: percentages, framework names, plain numbers."""
    def percent(v):
        return "—" if v is None or pd.isna(v) else f"{v:.1%}"

    def verdict(v, seeds, differs):
        if v == MISMATCH:
            names = [framework_name(fw) for fw in differs]
            if len(names) == 1:
                return f"✗ {v}: {names[0]} differs"
            return f"✗ {v}: {', '.join(names[:-1])} and {names[-1]} disagree"
        return f"{v}: {seeds} seed{'s' if seeds > 1 else ''}" if v == UNDECIDED else v

    table = match.rename(columns={"training_learning_rate": "learning rate",
                                  "training_epochs": "epochs"})
    table = table.drop(columns=[c for c in table if c.endswith(" verdict")])
    # A run's schedule is one setting, said beside the table; a column where groups differ
    # by it alone (records from before the rate decayed beside later ones).
    decay = table.pop("training_decay_epochs")
    if decay.nunique() > 1:
        table.insert(table.columns.get_loc("epochs") + 1, "decaying",
                     ["constant" if d == 0 else f"last {d}" for d in decay])
    table["learning rate"] = table["learning rate"].map(lambda v: f"{v:g}")
    table["epochs"] = table["epochs"].astype(int)
    for column in [c for c in table if c.endswith(" accuracy")]:
        framework = column.partition(" ")[0]
        seeds = table.pop(f"{framework} seeds")
        table[column] = [f"{percent(a)} ({k} seed{'s' if k > 1 else ''})"
                         for a, k in zip(table[column], seeds, strict=True)]
        table = table.rename(columns={column: f"{framework_name(framework)} accuracy"})
    for column in ("difference", "configured", "statistical"):
        table[column] = table[column].map(percent)
    if "noise" in table:  # beside the tolerance it made: one column fewer, to fit the page
        table["statistical"] = [f"{t} {NOISE[n]}" if n in NOISE else t
                                for t, n in zip(table["statistical"], table.pop("noise"),
                                                strict=True)]
    table["verdict"] = [verdict(v, k, d) for v, k, d in
                        zip(table["verdict"], table.pop("seeds"), table.pop("differs"),
                            strict=True)]
    return table.rename(columns={"configured": "tolerance (configured)",
                                 "statistical": f"tolerance ({CONFIDENCE:.0%})"})


def verdicts(frame: pd.DataFrame) -> pd.Series:
    """Per cell of `frame` (any scenario): its framework's accuracy verdict in its group
    (match, mismatch, undecided, not established: `accuracy_match`), or None for a cell that
    was not compared (not a trained training cell, or no other framework in its group)."""
    result = pd.Series(None, index=frame.index, dtype=object)
    needed = {"training_final_accuracy", "training_accuracy_tolerance", *GROUP}
    if not needed - {"training_decay_epochs"} <= set(frame):
        return result
    trained = _decay_known(frame[frame["scenario"].eq("training") & frame["status"].eq("ok")
                                 & frame["training_final_accuracy"].notna()])
    match = accuracy_match(trained) if len(trained) else pd.DataFrame()
    if match.empty:
        return result
    by_key = {}
    for _, row in match.iterrows():
        key = tuple(row[column] for column in GROUP)
        for column in match:
            if column.endswith(" verdict") and isinstance(row[column], str):
                by_key[(*key, column.removesuffix(" verdict"))] = row[column]
    keys = trained[[*GROUP, "framework"]].apply(tuple, axis=1)
    result.loc[trained.index] = keys.map(by_key)
    return result.where(result.notna(), None)


def _time_to_target(row) -> str:
    """'12.3 s' or 'not reached'; with seeds, the median over seeds (a seed that never
    reached it counts as infinitely slow) and each seed's in brackets."""
    def text(v) -> str:
        return "not reached" if v is None or pd.isna(v) else f"{v:,.1f}"

    per_seed = _listed(row.get("training_time_to_accuracy_s_per_seed"))
    if per_seed is None:
        return text(row["training_time_to_accuracy_s"])
    times = [np.inf if v is None or pd.isna(v) else float(v) for v in per_seed]
    median = float(np.median(times))
    return f"{text(median if np.isfinite(median) else None)} ({', '.join(map(text, per_seed))})"


def throughput_table(trained: pd.DataFrame) -> pd.DataFrame:
    """Per cell: images/s (over the wall time; at the median step beside), the step's
    median, the share of it spent waiting for the next batch, the speed-up over its
    framework's eager (eager's wall time per step over the cell's, as the answer ranks them:
    in rounds, their geometric means over the rounds; dlbench.analysis.summary.headline), final
    accuracy (✗: its group's frameworks disagree) and time to the
    target (with seeds: their median, then each)."""
    table = pd.DataFrame({
        "framework": trained["framework"].map(framework_name),
        "optimization": trained["optimization"], "pipeline": trained["pipeline"],
        "optimizer": trained["optimizer"], "batch": trained["batch"],
        "images/s": trained["samples_per_s"].map(lambda v: f"{v:,.0f}"),
        "at the median step": trained.reindex(columns=["median_step_samples_per_s"]).iloc[
            :, 0].map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}"),
        "median step ms": trained["median_ms"].map(fmt_ms),
        "waiting for data": trained["breakdown_input_wait_share"].map(lambda v: f"{v:.0%}"),
        # A speed-up that came with a mismatch does not count (`valid_speedup`).
        "vs eager": [f"{v:.2f}×" if ok else "" for v, ok in zip(
            trained["speedup"], valid_speedup(trained), strict=True)],
        "accuracy": [f"{a:.1%}" + (" ✗" if b else "")
                     for a, b in zip(trained["training_final_accuracy"],
                                     trained["wrong_answer"], strict=True)],
        "time to target (s)": [_time_to_target(row) for _, row in trained.iterrows()],
    })
    order = ["framework", "optimizer", "pipeline", "optimization"]
    return table.sort_values(order).reset_index(drop=True)


def curves(trained: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per epoch, one row per cell, seed and epoch (long form)."""
    rows = []
    for _, row in trained.iterrows():
        per_seed = row.get("training_test_accuracy_per_seed")
        runs = list(per_seed) if isinstance(per_seed, list | np.ndarray) and len(per_seed) \
            else [row["training_test_accuracy"]]
        for seed, accuracies in enumerate(runs):
            for epoch, accuracy in enumerate(accuracies, start=1):
                rows.append({"framework": framework_name(row["framework"]),
                             "cell": row["cell_id"], "optimization": row["optimization"],
                             "pipeline": row["pipeline"], "optimizer": row["optimizer"],
                             "seed": seed, "epoch": epoch, "accuracy": float(accuracy)})
    return pd.DataFrame(rows)


# A step's parts (dlbench.measure.training), in the order they happen, as the report names
# them.
PARTS = {"input_wait": "waiting for data", "copy": "copy to device",
         "forward_backward": "forward + backward", "optimizer": "optimizer step",
         "step": "step (not split)", "rest": "rest"}


def step_parts(trained: pd.DataFrame) -> pd.DataFrame:
    """Per cell, the mean time per step in each part that its run measured (ms)."""
    table = pd.DataFrame({"cell": trained["cell_id"]})
    for part, label in PARTS.items():
        column = f"breakdown_{part}_mean_ms"
        if column in trained and trained[column].notna().any():
            table[label] = trained[column].fillna(0.0)
    return table.sort_values("cell").reset_index(drop=True)
