"""What re-running this report's matrix takes: the command, the config as YAML, and the
identities of the code, the software and the environment — from the provenance that
aggregation wrote (dlbench.records.provenance) and the environment every cell recorded."""

from dataclasses import dataclass

import pandas as pd

from dlbench.format import framework_name


@dataclass
class Reproduce:
    """command: the shell lines to run (None without provenance); config: the config as
    YAML (None without provenance); table: what: value rows."""

    command: str | None
    config: str | None
    table: pd.DataFrame


def _values(frame: pd.DataFrame, column: str) -> str:
    if column not in frame:
        return "—"
    values = sorted({str(v) for v in frame[column].dropna()})
    return ", ".join(values) or "—"


def reproduce(frame: pd.DataFrame, provenance: dict | None) -> Reproduce:
    """The command and config from `provenance`; the table: the cells' git commit (and
    whether the tree had uncommitted changes), their environment fingerprints, the hash of
    every installed package per framework, and from the provenance the workflow's commit,
    the hash of the pinning files, the config files and the versions of dlbench and
    Snakemake."""
    rows = [("cells' git commit", _values(frame, "env_git_commit")),
            ("uncommitted changes", _values(frame, "env_git_dirty")),
            ("environment fingerprint", _values(frame, "env_fingerprint")),
            ("hardware fingerprint", _values(frame, "env_hardware_fingerprint"))]
    if "env_packages_hash" in frame:
        for framework, cells in frame.groupby("framework"):
            rows.append((f"installed packages hash ({framework_name(framework)})",
                         _values(cells, "env_packages_hash")))
    command = config = None
    if provenance:
        import yaml

        rows += [("workflow's git commit", str(provenance.get("git_commit"))
                  + (" (with uncommitted changes)" if provenance.get("git_dirty") else "")),
                 ("lock hash (" + ", ".join(provenance.get("pins", [])) + ")",
                  str(provenance.get("pins_hash"))),
                 ("config files given", ", ".join(provenance.get("configfiles") or []) or "—"),
                 ("dlbench", str(provenance.get("dlbench"))),
                 ("Snakemake", str(provenance.get("snakemake")))]
        config = yaml.safe_dump(provenance.get("config") or {}, sort_keys=False,
                                default_flow_style=None)
        commit = provenance.get("git_commit") or "<commit>"
        command = (f"git clone <dlbench repository> dlbench && cd dlbench\n"
                   f"git checkout {commit}\n"
                   "# save the config below as config.yaml, then:\n"
                   f"{provenance.get('command')}")
    return Reproduce(command, config, pd.DataFrame(rows, columns=["what", "value"]))
