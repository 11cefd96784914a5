"""Training: the same CNN in each framework, trained from image files on disk through the
framework's own input pipeline, with accuracy recorded so that the comparison is fair.

Cells: framework × model × device × batch × data set × pipeline × optimizer ×
optimization. A cell builds the CNN with the shared initial weights (the same arrays in
every framework, from the seed), trains it for the configured epochs, timing every step's
wait for its batch apart from the step itself, and tests it after every epoch. Repeats
are fresh processes with seeds seed, seed + 1, …: their accuracies give the seed-to-seed
spread that the frameworks' accuracies are compared with.
"""

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.catalogue import recipes
from dlbench.catalogue.models.vision import MODELS as CNNS
from dlbench.catalogue.models.vision import get_cnn, initial_weights
from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
from dlbench.data import pipeline as pipelines
from dlbench.files import paths
from dlbench.scenarios import Axis, Scenario, median_over, register
from dlbench.scenarios._compilation import COMPILATION_SCHEMA
from dlbench.scenarios._optimizer import OPTIMIZER_AXIS, OptimizerSettings
from dlbench.scenarios.training_ops import TrainingOps

if TYPE_CHECKING:
    from dlbench.scenarios.cell import Cell

DATASETS = ("synthetic", "digits", "cifar10")


def train_images(dataset: str, data: dict) -> int:
    """How many training images a data set has, known before it is built (from the
    config's `data:` section, or fixed by the source)."""
    from dlbench.data import cifar10, digits

    return {"synthetic": data["synthetic_train"], "digits": digits.TRAIN_IMAGES,
            "cifar10": cifar10.TRAIN_IMAGES}[dataset]


class Training(OptimizerSettings, Scenario):
    name = "training"
    ops_interface = TrainingOps
    # A step fed by loader workers waits for a batch or finds one ready: its times are
    # bimodal, and the median step says less than the images over the wall time (on an
    # H100, 4.9 and 9.1 ms medians for 6,502 and 5,105 images/s).
    headline = "wall"
    description = ("training the CNN from image files through each framework's own input "
                   "pipeline, test accuracy after every epoch")
    axes = (
        Axis("batch", "batch_sizes", "b", "batch sizes (images per step)"),
        Axis("dataset", "datasets", "", "data sets (see config/README.md)", str,
             choices=DATASETS),
        Axis("pipeline", "pipelines", "", "input pipelines: memory, or w<workers>[-p<prefetch>]"
             "[-cache][-pin]", str, pattern=pipelines.PATTERN, expected=pipelines.EXPECTED,
             examples=tuple(pipelines.variants("gpu"))),
        OPTIMIZER_AXIS,
    )
    summary_sections = {"throughput": "", "training": "training_", "pipeline": "pipeline_",
                        "ablation": "ablation_", "compilation": "compilation_"}

    def models(self) -> list[str]:
        return list(CNNS)

    def unsupported_reason(self, cell: "Cell") -> str | None:
        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        return (optimization.unsupported_reason(cell.framework, cell.device)
                or pipelines.parse(cell.size("pipeline")).unsupported_reason(
                    cell.framework, cell.device))

    def protocol(self, cell: "Cell") -> int:
        """2: throughput over wall time, the ablation fed the pipeline's own batches and
        running the timed program, every pipeline in the recipe's layout, tf.data without
        its automatic optimizations (results of protocol 1 are measured again); 3: the
        time to the target accuracy leaves the first step (compilation) out; 4: JAX's and
        TensorFlow's memory pipelines make each batch with one compiled function."""
        return 4

    # -- settings of every cell ---------------------------------------------------------------

    def settings_schema(self) -> dict:
        return {
            "epochs": {"description": "training epochs of every cell", "type": "integer",
                       "minimum": 1, "default": 10},
            **super().settings_schema(),  # the learning rate of each optimizer
            "decay_epochs": {"description": "the last epochs over which the learning rate "
                             "falls linearly to zero, in every framework (0: constant; at most "
                             "epochs)",
                             "type": "integer", "minimum": 0, "default": 1},
            "target_accuracy": {"description": "the test accuracy whose training time is "
                                "reported (time to accuracy: the epochs' training time until "
                                "it is reached, the first step's computation, where "
                                "compilation lands, apart)",
                                "type": "number",
                                "exclusiveMinimum": 0, "maximum": 1, "default": 0.7},
            "accuracy_tolerance": {"description": "the largest difference of final test "
                                   "accuracy between frameworks that counts as a match (or 2 "
                                   "standard errors of the difference, if larger)",
                                   "type": "number", "minimum": 0, "maximum": 1,
                                   "default": 0.02},
            "seeds": {"description": "train every cell with this many seeds (seed, seed + 1, "
                      "…), each in a fresh process; at least measurement.repeats",
                      "type": "integer", "minimum": 1, "default": 1},
            "breakdown": {"description": "time every step in parts (copy, forward and backward, "
                          "optimizer), each synchronized on a GPU; false: the step whole",
                          "type": "boolean", "default": True},
            "ablation": {"description": "time the steps fed batches already on the device, "
                         "in a block after each epoch (the step's state restored after "
                         "it): the pipeline's ceiling and its efficiency",
                         "type": "boolean", "default": True},
            "cold_cache": {"description": "evict the data set's files from the page cache "
                           "before each cell, so that the first epoch reads them from disk",
                           "type": "boolean", "default": False},
            "profile": {"description": "record a py-spy flame graph of each cell's timed steps "
                        "(an SVG beside its result); profiled timings are not compared with "
                        "unprofiled ones", "type": "boolean", "default": False},
        }

    def measurement_settings(self, settings: dict) -> dict:
        # One process per seed: the run's repeats (measurement.repeats) are the seeds; in
        # rounds, each round is a seed of its own (`rounds`).
        if settings.get("round") is not None:
            return settings
        return {**settings, "repeats": max(settings["repeats"], settings["seeds"])}

    def rounds(self, config: dict) -> int:
        """With rounds, a cell's seeds are its rounds (seed, seed + 1, … one a round):
        interleaved with the other frameworks' as every cell's rounds are."""
        return 1 if config["measurement"]["rounds"] == 1 else config[self.name]["seeds"]

    rounds_key = "training.seeds"

    def validate(self, config: dict) -> list[str]:
        """Problems the schema cannot see: a pipeline's numbers, too few steps to time, a
        missing CIFAR-10 folder."""
        section, data = config[self.name], config["data"]
        problems = [f"config key '{self.name}.pipelines[{i}]': {name!r}: {problem}"
                    for i, name in enumerate(section["pipelines"])
                    if (problem := pipelines.problem(name))]
        for dataset in section["datasets"]:
            images = train_images(dataset, data)
            for batch in section["batch_sizes"]:
                if images // batch * section["epochs"] < 2:
                    problems.append(
                        f"config key '{self.name}.batch_sizes': batch {batch} on '{dataset}' "
                        f"({images} training images) for {section['epochs']} epoch(s) makes "
                        f"{images // batch * section['epochs']} steps, fewer than the 2 a cell "
                        "needs (a first step, and one to time): give a smaller batch, more "
                        "epochs" + (" or more images (data.synthetic_train)"
                                    if dataset == "synthetic" else ""))
        if "cifar10" in section["datasets"]:
            from dlbench.data import cifar10

            try:
                cifar10.check(data["cifar10_dir"])
            except ValueError as exc:
                problems.append(str(exc))
        return problems

    # -- the data set ----------------------------------------------------------------------

    def inputs(self, cell: "Cell") -> dict[str, str]:
        return {"data": paths.dataset(cell.size("dataset"))}

    def input_args(self, cells: list["Cell"], inputs: dict, group: bool) -> list[str]:
        return [f"--data={inputs['data'][0]}"] if "data" in inputs.keys() else []

    def add_input_options(self, parser) -> None:
        parser.add_argument("--data", type=Path,
                            help="training: a data set's folder (python -m dlbench.data)")

    def task_inputs(self, args, cell: "Cell") -> dict[str, str | None]:
        return {"data": args.data and str(args.data)}

    # -- measuring -----------------------------------------------------------------------------

    def measure(self, backend, cell: "Cell", settings: dict, clock, inputs: dict) -> dict:
        from dlbench.data import MANIFEST, check, decode, read_manifest
        from dlbench.frameworks import load_ops
        from dlbench.measure import pagecache
        from dlbench.measure import training as loop
        from dlbench.measure.training import Ablation, Evaluation, train

        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        problem = backend.precision_problem(optimization.precision.name)
        if problem:
            return {"status": "unsupported", "reason": problem}
        if not inputs.get("data"):
            raise ValueError("a training cell needs its data set (--data)")
        manifest = read_manifest(Path(inputs["data"]) / MANIFEST)
        check(manifest)  # every file there, of its size: a damaged set fails here, named
        batch, pipeline = cell.size("batch"), pipelines.parse(cell.size("pipeline"))
        steps_per_epoch = manifest["counts"]["train"] // batch
        if steps_per_epoch * settings["epochs"] < 2:
            raise ValueError(f"{manifest['counts']['train']} training images, batch {batch}, "
                             f"{settings['epochs']} epochs: fewer than the 2 steps a cell "
                             "needs (a first step, and one to time)")
        decay_epochs = min(settings["decay_epochs"], settings["epochs"])
        schedule = LearningRate(settings["learning_rate"],
                                steps_per_epoch * settings["epochs"],
                                steps_per_epoch * decay_epochs)
        seed = settings["seed"] + settings.get("repeat", 0)
        spec, optimizer = get_cnn(cell.model), OPTIMIZERS[cell.size("optimizer")]
        files = [Path(manifest["root"]) / path for path, _ in manifest["train"]]
        if settings["cold_cache"]:
            pagecache.evict(files)
        cache = pagecache.after_eviction(files, settings["cold_cache"])
        test_images, test_labels = decode(manifest, "test")
        ops: TrainingOps = load_ops(backend, "training")
        backend.reset_device_memory()
        try:
            model = ops.build(spec, initial_weights(spec, seed), optimization)
            opt = ops.optimizer(model, optimizer, schedule, optimization)
            batches = FirstEpoch(ops.pipeline(manifest, pipeline, batch, seed))
            step = ops.train_step(model, opt, optimization)
            evaluation = Evaluation(lambda: ops.logits(model, test_images, manifest),
                                    test_labels)
            # Its first call compiles the evaluation (JAX's jit; cuDNN's autotuner at its
            # batch): here, and not after the first epoch, inside the window of the timed
            # steps that the supervisor's samples cover (on an H200 it dwarfed the steps:
            # docs/what-has-run-where.md).
            evaluation.logits()
            clock.mark("model_ready_s")
            ablation = Ablation(
                step, min(loop.ABLATION_BATCHES, steps_per_epoch), batch, backend.synchronize,
                settings["warmup_iterations"], settings["min_duration_s"],
                settings["min_iterations"], apart=settings["breakdown"] and step.separable,
                blocks=settings["epochs"]) if settings["ablation"] else None
            run = train(settings["epochs"], batches, step, backend.synchronize, ops.mean_loss,
                        evaluation, steps_per_epoch, settings["warmup_iterations"],
                        settings["target_accuracy"], clock.mark, settings["breakdown"],
                        ablation)
            device_memory = backend.device_memory()
            compilation = ops.compilation()  # of the training steps and the ablation's
            ceiling = ablation.record() if ablation else None
        finally:
            ops.release()
        timing = run.timing()
        rate = {**loop.throughput(run.totals_ms, batch, run.wall_s),
                **loop.wall_step(run.totals_ms, run.wall_s)}
        if ceiling:
            ceiling.update(loop.efficiency(run.totals_ms, ceiling["samples_ms"],
                                           rate["samples_per_s"], ceiling["samples_per_s"]))
        return {
            "optimization": {**optimization.describe(), "description": optimization.description},
            "timing": timing,
            "throughput": rate,
            "pipeline": {**pipeline.describe(), "page_cache": cache,
                         "first_epoch": batches.figures(run, batch, settings["cold_cache"])},
            "ablation": ceiling,
            "training": {
                "seed": seed, "epochs": settings["epochs"], "steps_per_epoch": steps_per_epoch,
                "train_images": manifest["counts"]["train"],
                "test_images": manifest["counts"]["test"],
                "learning_rate": settings["learning_rate"], "decay_epochs": decay_epochs,
                "optimizer": optimizer.description,
                "test_accuracy": run.test_accuracy, "train_loss": run.train_loss,
                "epoch_s": run.epoch_s, "eval_s": run.eval_s,
                "final_accuracy": run.test_accuracy[-1],
                # Per seed, as after combining: a list of lists is never empty (an empty
                # list would be text in the summary, beside other cells' lists).
                "wrong_images_per_seed": [run.wrong_images],
                "target_accuracy": settings["target_accuracy"],
                "time_to_accuracy_s": run.time_to_accuracy_s,
                "accuracy_tolerance": settings["accuracy_tolerance"],
            },
            "compilation": compilation,
            "memory": device_memory or {},
        }

    def combine(self, records: list[dict]) -> dict:
        """The repeats (seeds): timing pooled as for any scenario, the step parts pooled,
        every seed's accuracy kept, and the final accuracy their mean."""
        ok = [r for r in records if r["status"] == "ok"]
        parts = {name: [x for r in ok for x in r["timing"]["breakdown"][name]["samples_ms"]]
                 for name in (ok[0]["timing"]["breakdown"] if ok else {})}
        runs = [r["training"] for r in ok]
        wall_s = sum(r["throughput"].get("wall_s") or sum(r["timing"]["samples_ms"]) / 1e3
                     for r in ok)
        # Each process's wall time per step.
        walls = [(r.get("throughput") or {}).get("wall_step_ms") for r in ok]
        final = super().combine(records)
        if len(records) == 1 or final["status"] != "ok":
            return final
        from dlbench.measure.training import throughput, timing, wall_step

        final["timing"]["breakdown"] = timing(final["timing"]["samples_ms"], parts, 0, 0,
                                              0)["breakdown"]
        accuracies = [r["final_accuracy"] for r in runs]
        # Time to accuracy: each seed's, and their median (a seed that never reached the
        # target counts as slower than any that did; None if the median did not reach it).
        times = [r["time_to_accuracy_s"] for r in runs]
        median = statistics.median(float("inf") if t is None else t for t in times)
        final["training"].update(
            time_to_accuracy_s_per_seed=times,
            time_to_accuracy_s=median if median != float("inf") else None,
            seeds=[r["seed"] for r in runs], final_accuracies=accuracies,
            final_accuracy=sum(accuracies) / len(accuracies),
            accuracy_spread=max(accuracies) - min(accuracies),
            test_accuracy_per_seed=[r["test_accuracy"] for r in runs],
            wrong_images_per_seed=[(r.get("wrong_images_per_seed") or [None])[0]
                                   for r in runs])
        samples = final["timing"]["samples_ms"]
        final["throughput"] = {
            **throughput(samples, records[0]["params"]["batch"], wall_s),
            **wall_step(samples, wall_s, [w for w in walls if w is not None])}
        if len(walls) == len(final["timing"]["repeats"]) and None not in walls:
            for repeat, wall in zip(final["timing"]["repeats"], walls, strict=True):
                repeat["wall_step_ms"] = wall  # each process's, as `dlbench compare` pairs them
        first_epochs = [(r.get("pipeline") or {}).get("first_epoch") for r in ok]
        if len(first_epochs) > 1 and all(first_epochs):  # every seed's, not the first's alone
            final["pipeline"]["first_epoch"] = median_over(first_epochs)
        ceilings = [r["ablation"] for r in ok if r.get("ablation")]
        if ceilings:  # the ceiling over every repeat's samples, the efficiency against it
            from dlbench.measure.training import efficiency

            final["ablation"] = _pooled_ablation(ceilings, records[0]["params"]["batch"])
            final["ablation"].update(efficiency(
                final["timing"]["samples_ms"], final["ablation"]["samples_ms"],
                final["throughput"]["samples_per_s"], final["ablation"]["samples_per_s"],
                seeds=[c for c in ceilings if c.get("efficiency_ci95")]))
        return final

    def iteration_flops(self, model: str, sizes: dict[str, int]) -> float | None:
        """A training step's FLOPs (dlbench.measure.flops.step_flops)."""
        from dlbench.measure import flops

        try:
            return flops.step_flops(self.name, model, sizes["batch"], sizes.get("seqlen"))
        except (KeyError, ValueError):  # a model without a count
            return None

    # -- its part of the result schema -------------------------------------------------------

    def result_schema(self) -> dict:
        schema = super().result_schema()
        number, numbers = {"type": "number", "minimum": 0}, {"type": "array",
                                                              "items": {"type": "number"}}
        positive = {"type": "number", "exclusiveMinimum": 0}
        schema["properties"] = {
            # samples_per_s: over the wall time of the timed steps (before protocol 2: over
            # the median step, which records without `statistic` used).
            "throughput": {"type": ["object", "null"], "required": ["samples_per_s"],
                           "properties": {"samples_per_s": positive, "wall_s": positive,
                                          "steps": {"type": "integer", "minimum": 1},
                                          "median_step_samples_per_s": positive,
                                          "statistic": {"type": "string"},
                                          "wall_step_ms": positive,
                                          "wall_step_ms_ci95": {**numbers, "minItems": 2,
                                                                "maxItems": 2}}},
            "pipeline": {"type": "object", "required": ["name", "in_memory", "workers"]},
            "compilation": COMPILATION_SCHEMA,
            "ablation": {"type": ["object", "null"],
                         "required": ["samples_per_s", "median_ms", "efficiency"],
                         "properties": {"samples_per_s": positive,
                                        "median_step_samples_per_s": positive,
                                        "efficiency": {"type": "number", "minimum": 0},
                                        "efficiency_ci95": {**numbers, "minItems": 2,
                                                            "maxItems": 2},
                                        "not_a_ceiling": {"type": "boolean"},
                                        "note": {"type": ["string", "null"]},
                                        "program": {"type": "string"},
                                        "batches": {"type": "integer", "minimum": 1},
                                        "blocks": {"type": "integer", "minimum": 1}}},
            "training": {
                "type": "object",
                "required": ["epochs", "test_accuracy", "train_loss", "epoch_s",
                             "final_accuracy", "time_to_accuracy_s", "target_accuracy"],
                "properties": {
                    "epochs": {"type": "integer", "minimum": 1},
                    "test_accuracy": {**numbers, "minItems": 1},
                    "train_loss": numbers, "epoch_s": numbers,
                    "final_accuracy": {"type": "number", "minimum": 0, "maximum": 1},
                    "time_to_accuracy_s": {"type": ["number", "null"], "minimum": 0},
                    "target_accuracy": number,
                },
            },
        }
        schema["ok_requires"] = ["throughput", "training", "pipeline"]
        return schema


class FirstEpoch:
    """The pipeline, with the first epoch's waits for a batch timed on their own: that
    epoch is the cold one with `cold_cache`, and the steady-state samples leave out its
    first steps, so its figures are reported apart."""

    def __init__(self, batches: "Callable[[int], Iterator]"):
        self.batches, self.wait_s, self.steps = batches, 0.0, 0

    def __call__(self, epoch: int) -> "Iterator":
        iterator = self.batches(epoch)
        return self._timed(iterator) if epoch == 0 else iterator

    def _timed(self, iterator: "Iterator") -> "Iterator":
        while True:
            start = time.perf_counter()
            batch = next(iterator, None)
            self.wait_s += time.perf_counter() - start
            if batch is None:
                return
            self.steps += 1
            yield batch

    def figures(self, run, batch: int, cold: bool) -> dict:
        """The first epoch from wall time: images/s (its steps × batch over its training
        time; also without the first step, which compiles and starts the pipeline) and
        its share of waiting for data; the later epochs' images/s beside it."""
        seconds = run.epoch_s[0]
        later = sum(run.epoch_s[1:])
        return {
            "cold": cold, "steps": self.steps, "seconds": seconds, "input_wait_s": self.wait_s,
            "input_wait_share": self.wait_s / seconds if seconds > 0 else None,
            "images_per_s": self.steps * batch / seconds if seconds > 0 else None,
            "images_per_s_after_first_step": (self.steps - 1) * batch
            / (seconds - run.first_step_s) if self.steps > 1 and seconds > run.first_step_s
            else None,
            "later_epochs_images_per_s": self.steps * batch * (len(run.epoch_s) - 1) / later
            if later > 0 else None,
        }


def _pooled_ablation(ceilings: list[dict], batch: int) -> dict:
    from dlbench.measure.stats import summarize
    from dlbench.measure.training import throughput

    samples = [x for c in ceilings for x in c["samples_ms"]]
    # `blocks` stays each process's (seed's) count; the samples are every seed's blocks'.
    return {**ceilings[0], "iterations": len(samples), "samples_ms": samples,
            **summarize(samples), **throughput(samples, batch, sum(samples) / 1e3)}


register(Training())
