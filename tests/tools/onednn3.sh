#!/bin/sh
# tests/tools/onednn3.sh DIR — oneDNN 3.x, an optional GEMM library of the CPU calibration
# (kernels/cpu/gemm_dnnl3.c loads DIR/lib/libdnnl.so.3 with dlopen when it is there): Intel's
# `onednn-cpu-gomp` wheel from PyPI (pip, in a throw-away venv of Debian's python3-venv; the GNU
# OpenMP build, on the libgomp mingpt itself runs), of which DIR/lib keeps libdnnl.so.3 alone.
# Debian's oneDNN 2.x stays linked in as before: the two live side by side in one process
# (gemm_dnnl3.h says how). The version is pinned so that every machine measures the same
# library. Idempotent: DIR/.ready names the pin of a finished one. pip's own settings apply
# (PIP_FIND_LINKS=<dir with the wheel> PIP_NO_INDEX=1 installs from a local copy).
#   exit 0: DIR is ready
#   exit 1: it could not be made (no python3-venv, PyPI unreachable); says why. mingpt builds,
#           runs and passes its tests without it (oneDNN 3 is then simply not a candidate).
dir=${1:?usage: onednn3.sh DIR}
py=${PYTHON:-/usr/bin/python3}
pin="onednn-cpu-gomp==2023.2.0"
[ -f "$dir/.ready" ] && [ "$(cat "$dir/.ready")" = "$pin" ] && exit 0
rm -rf "$dir"
mkdir -p "$dir" || exit 1
tmp="$dir/.tmp"
"$py" -m venv "$tmp/venv" || { echo "onednn3: $py cannot create a venv (apt-get install python3-venv)"; rm -rf "$dir"; exit 1; }
"$tmp/venv/bin/pip" download --disable-pip-version-check --no-input -q --no-deps -d "$tmp/wheel" "$pin" \
  || { echo "onednn3: pip download $pin failed (PyPI unreachable?); oneDNN 3 stays off"; rm -rf "$dir"; exit 1; }
"$py" - "$tmp/wheel" "$dir/lib" <<'PY' || { echo "onednn3: cannot unpack the wheel"; rm -rf "$dir"; exit 1; }
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if "/lib/" in n and os.path.basename(n) == "libdnnl.so.3":
            with z.open(n) as src, open(os.path.join(out, "libdnnl.so.3"), "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$tmp"
[ -f "$dir/lib/libdnnl.so.3" ] || { echo "onednn3: no libdnnl.so.3 in the wheel"; rm -rf "$dir"; exit 1; }
printf '%s\n' "$pin" > "$dir/.ready"
echo "onednn3: $dir ready ($pin: $(du -sh "$dir/lib" | cut -f1))"
