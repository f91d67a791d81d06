#!/bin/sh
# tests/tools/pyenv.sh DIR — the Python environment of tests/test_export.sh: a venv in DIR that
# sees Debian's python3-torch (--system-site-packages) plus the `safetensors` package from PyPI
# (Debian has no python3-safetensors). Idempotent: DIR/.ready marks a finished one.
#   exit 0: DIR/.ready (ready), or DIR/.offline holding the reason PyPI cannot be reached (the
#           test then says it skips, and why)
#   exit 1: anything else went wrong (no python3-venv, pip failed although PyPI answers)
dir=${1:?usage: pyenv.sh DIR}
py=${PYTHON:-/usr/bin/python3}
[ -f "$dir/.ready" ] && exit 0
rm -rf "$dir"
if ! reason=$("$py" - <<'PY' 2>&1
import urllib.request
urllib.request.urlopen("https://pypi.org/simple/safetensors/", timeout=20).read(1)
PY
); then
  mkdir -p "$dir" && printf 'https://pypi.org cannot be reached: %s\n' "$(printf '%s' "$reason" | tail -1)" > "$dir/.offline"
  echo "pyenv: PyPI cannot be reached; tests/test_export.sh will skip its PyTorch checks ($dir/.offline)"
  exit 0
fi
"$py" -c "import torch" 2>/dev/null || { echo "pyenv: $py cannot import torch (apt-get install python3-torch)"; exit 1; }
"$py" -m venv --system-site-packages "$dir" || { echo "pyenv: cannot create a venv (apt-get install python3-venv)"; exit 1; }
"$dir/bin/pip" install --disable-pip-version-check -q safetensors || { echo "pyenv: pip install safetensors failed"; exit 1; }
"$dir/bin/python" -c "import safetensors.torch, torch" || exit 1
touch "$dir/.ready"
echo "pyenv: $dir ready (torch $("$dir/bin/python" -c 'import torch; print(torch.__version__)'), safetensors $("$dir/bin/python" -c 'import safetensors; print(safetensors.__version__)'))"
