#!/usr/bin/env bash
# Create .venv with dlbench and its pinned dependencies (CPU builds). Idempotent: a
# second run with unchanged requirements takes a second.
#   scripts/setup.sh          the benchmark environment
#   scripts/setup.sh --test   also what the tests need (Chromium, from Debian's packages)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=.venv
stamp="$VENV/.dlbench-requirements.sha256"
want=$(sha256sum requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing the pinned environment into $VENV (a few minutes, ~3.5 GB)"
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
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

if [[ "${1:-}" == "--test" ]] && ! command -v chromium > /dev/null; then
  echo "setup: installing Chromium (Debian) for the report's browser test"
  sudo_=""; [[ $(id -u) -eq 0 ]] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends chromium > /dev/null
fi
echo "setup: ready ($VENV)"
