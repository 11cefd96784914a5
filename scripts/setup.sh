#!/usr/bin/env bash
# Create .venv with dlbench and its pinned dependencies (CPU builds). Idempotent: a
# second run with unchanged requirements takes a second.
#   scripts/setup.sh                   the benchmark environment
#   scripts/setup.sh --test            also what the tests need from the system: the Debian
#                                      packages in TEST_PACKAGES below, each checked on its own
#                                      and only the missing ones installed (root, or sudo)
#   scripts/setup.sh --test --dry-run  say what would be installed, install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

# What the test suite needs from the system, as Debian packages (tests/test_setup.py checks
# that everything the tests and the scripts they run call is here, and installed).
TEST_PACKAGES=(
  chromium chromium-driver  # the report's browser test: the browser, and Selenium's
                            # /usr/bin/chromedriver (Selenium cannot download a driver here)
  slurmctld slurmd slurm-client munge  # the SLURM test's one-node cluster (scripts/slurm/up.sh)
  gcc g++ libpython3.11-dev  # torch.compile (Inductor) builds C++ against Python.h on
                             # the CPU (Debian's python3.11 keeps it in this package)
)

test=0 dry_run=0
for arg in "$@"; do
  case $arg in
    --test) test=1 ;;
    --dry-run) dry_run=1 ;;
    *) echo "usage: scripts/setup.sh [--test] [--dry-run]" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3.11}
VENV=.venv
stamp="$VENV/.dlbench-requirements.sha256"
want=$(sha256sum requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)

if ((dry_run)); then
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "setup: would install the pinned environment into $VENV"
  fi
elif [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing the pinned environment into $VENV (a few minutes, ~3.5 GB)"
  if [[ ! -x "$VENV/bin/python" ]]; then
    command -v "$PYTHON" > /dev/null || { echo "setup: needs $PYTHON (or PYTHON=/path/to/python3.11)" >&2; exit 1; }
    # Debian's python3.11 makes venvs only with its python3.11-venv package (ensurepip).
    "$PYTHON" -c "import ensurepip" 2> /dev/null \
      || { echo "setup: $PYTHON cannot create a venv: install python3.11-venv (Debian)" >&2; exit 1; }
    "$PYTHON" -m venv "$VENV"
  fi
  pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
  # torch first and pinned: anything else asking for torch would pull the CUDA build.
  pip install torch==2.13.0
  pip install -r requirements.txt
  pip install --no-deps -e .
  if "$VENV/bin/python" -m pip list 2>/dev/null | grep -i '^nvidia-' | grep -vi '^nvidia-ml-py '; then
    echo "setup: CUDA wheels were installed; this environment must stay CPU-only" >&2
    exit 1
  fi
  "$VENV/bin/python" -m pip check
  echo "$want" > "$stamp"
fi

if ((test)); then
  missing=()
  for package in "${TEST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q " ok installed$" \
      || missing+=("$package")
  done
  if ((dry_run)); then
    echo "setup: test packages (Debian): ${TEST_PACKAGES[*]}"
    echo "setup: would install: ${missing[*]:-nothing}"
  elif ((${#missing[@]})); then
    echo "setup: installing ${missing[*]} (Debian) for the tests"
    as_root=()
    if [[ $(id -u) -ne 0 ]]; then
      command -v sudo > /dev/null || { echo "setup: needs root or sudo to install ${missing[*]}" >&2; exit 1; }
      as_root=(sudo)
    fi
    # env: sudo would drop DEBIAN_FRONTEND; the lock timeout waits for another apt or dpkg.
    apt_get() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 "$@"; }
    install_() {
      apt_get install -y --no-install-recommends "${missing[@]}" \
        > /dev/null 2> >(grep -v "^debconf: delaying package configuration" >&2)
    }
    # The package lists are refreshed only when they lack a package or are out of date.
    if ! apt-cache show "${missing[@]}" > /dev/null 2>&1 || ! install_; then
      apt_get update
      install_
    fi
  fi
fi
if ! ((dry_run)); then
  # dlbench's own bytecode, made now: where PYTHONDONTWRITEBYTECODE is set (as on the
  # 2-core machines of docs/measurements.md), Python never writes it, and each of a run's
  # hundreds of processes compiled src/ afresh (pip compiles the installed packages; a file
  # changed since is compiled afresh, in memory, until setup runs again).
  "$VENV/bin/python" -m compileall -q src \
    || echo "setup: could not compile all of src/ to bytecode (it runs, more slowly)" >&2
  echo "setup: ready ($VENV)"
fi
