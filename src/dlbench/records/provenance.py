"""What re-running a matrix takes, written by `dlbench aggregate` beside the summary
(results/provenance.json): the config as the workflow read it, the config files it was
given, the command that runs it again, dlbench's commit, and hashes of the files that pin
the software (requirements.txt and envs/*.yaml)."""

import hashlib
import json
from pathlib import Path

from dlbench import REPO_ROOT, __version__
from dlbench.measure.env import git_state, version

NAME = "provenance.json"
# The files that pin the software, relative to the repository.
PINS = ("requirements.txt", "envs/*.yaml")


def pins_hash(root: Path = REPO_ROOT) -> str | None:
    """sha256 (16 hex digits) of the pinning files' names and contents; None if none."""
    files = sorted(p for pattern in PINS for p in root.glob(pattern) if p.is_file())
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# Runs the same matrix from the repository at the recorded commit, with the recorded config
# (the config files and any --config values, merged) saved as config.yaml.
COMMAND = "snakemake --cores all --configfile config.yaml"


def record(config: dict, configfiles: list[str]) -> dict:
    git = git_state()
    return {"config": config, "configfiles": list(configfiles), "command": COMMAND,
            "dlbench": __version__, "snakemake": version("snakemake"),
            "git_commit": git["commit"], "git_dirty": git["dirty"], "pins_hash": pins_hash(),
            "pins": list(PINS)}


def write(path: Path, config: dict, configfiles: list[str]) -> None:
    from dlbench.files.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(record(config, configfiles), indent=2, sort_keys=True))


def read(summary: Path) -> dict | None:
    """The provenance beside a summary, or None where aggregation wrote none."""
    path = Path(summary).with_name(NAME)
    return json.loads(path.read_text()) if path.is_file() else None
