#!/bin/sh
# tests/tools/pyenv.sh DIR — the Python environment of tests/test_export.sh: a venv in DIR
# (Debian's python3-venv, installed by `make deps`) with NumPy, the `safetensors` library and
# `ml_dtypes` (NumPy's bfloat16) from PyPI; Debian has no python3-safetensors. No PyTorch: the
# export test's model is tests/np_gpt.py. Versions are pinned so that every machine checks with
# the same readers. Idempotent: DIR/.ready marks a finished one (and names the pins, so a change
# of pins rebuilds it).
#   exit 0: DIR is ready
#   exit 1: it could not be made (no python3-venv, PyPI unreachable, pip failed); says why
dir=${1:?usage: pyenv.sh DIR}
py=${PYTHON:-/usr/bin/python3}
pins="numpy==2.4.6 safetensors==0.8.0 ml_dtypes==0.6.0"
[ -f "$dir/.ready" ] && [ "$(cat "$dir/.ready")" = "$pins" ] && exit 0
rm -rf "$dir"
"$py" -m venv "$dir" || { echo "pyenv: $py cannot create a venv (apt-get install python3-venv; make deps does)"; exit 1; }
# shellcheck disable=SC2086
"$dir/bin/pip" install --disable-pip-version-check --no-input -q $pins \
  || { echo "pyenv: pip install $pins into $dir failed (PyPI must be reachable; the export test needs these)"; exit 1; }
"$dir/bin/python" -c "import numpy, safetensors.numpy, ml_dtypes" || { echo "pyenv: $dir cannot import what was installed"; exit 1; }
printf '%s\n' "$pins" > "$dir/.ready"
echo "pyenv: $dir ready ($pins)"
