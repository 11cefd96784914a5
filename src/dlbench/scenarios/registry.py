"""The registered scenarios: the built-in ones, then the plugins that DLBENCH_PLUGINS names,
each loaded the first time the registry is read. Apart from the Scenario class
(dlbench.scenarios), so that a cell can find its scenario without importing it."""

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

PLUGINS_VARIABLE = "DLBENCH_PLUGINS"
BUILT_IN = ("inference", "training", "train_step", "generation")

_REGISTRY: dict[str, Any] = {}  # name → dlbench.scenarios.Scenario
_loaded = False


def register(scenario: Any) -> Any:
    """Add a scenario to the registry (a plugin calls this when it is loaded)."""
    if not scenario.name.isidentifier() or not scenario.name.islower():
        raise ValueError(f"scenario name {scenario.name!r}: lower-case letters, digits and _")
    _REGISTRY[scenario.name] = scenario
    return scenario


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in BUILT_IN:
        importlib.import_module(f"dlbench.scenarios.{name}")
    for path in filter(None, os.environ.get(PLUGINS_VARIABLE, "").split(os.pathsep)):
        spec = importlib.util.spec_from_file_location(f"dlbench_plugin_{Path(path).stem}", path)
        if spec is None or not Path(path).is_file():
            raise FileNotFoundError(f"{PLUGINS_VARIABLE}: no Python file at {path}")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def scenarios() -> dict[str, Any]:
    """Every registered scenario by name."""
    _load()
    return dict(_REGISTRY)


def get(name: str) -> Any:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(_REGISTRY)}") from None
