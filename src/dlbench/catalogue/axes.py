"""The fixed values of the matrix axes, and the frameworks' names and labels from their
registry (dlbench.catalogue.frameworks)."""

from dlbench.catalogue.frameworks import REGISTERED, labels

FRAMEWORKS = REGISTERED
DEVICES = ("cpu", "gpu")
FRAMEWORK_LABELS = labels()

# How a cell whose optimization belongs to the other framework is unsupported: the
# analysis counts such cells once as not applicable by this phrase (dlbench.analysis.status).
OTHER_FRAMEWORK = "does not exist in"


def other_framework_reason(optimization: str, framework: str, frameworks, what: str = ""
                           ) -> str:
    """Why `optimization`, which exists only in `frameworks`, does not apply to `framework`
    (`what`: e.g. " training", after the framework's name)."""
    others = ", ".join(FRAMEWORK_LABELS[f] for f in sorted(frameworks))
    return (f"optimization '{optimization}' {OTHER_FRAMEWORK} "
            f"{FRAMEWORK_LABELS[framework]}{what} (only in {others})")


def other_scenario_reason(scenario: str, framework: str, measured) -> str:
    """Why `framework`, which measures only the scenarios `measured`, has no `scenario`
    cells: not applicable by design, by the same phrase as another framework's
    optimization."""
    return (f"scenario '{scenario}' {OTHER_FRAMEWORK} {FRAMEWORK_LABELS[framework]} (it "
            f"measures {', '.join(measured)} only)")
