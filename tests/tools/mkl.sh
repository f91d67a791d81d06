#!/bin/sh
# tests/tools/mkl.sh DIR — Intel's oneMKL, an optional GEMM library of the CPU calibration
# (kernels/cpu/gemm_mkl.c loads DIR/lib/libmkl_rt.so.* with dlopen when it is there): the `mkl`
# wheel from PyPI (pip, in a throw-away venv of Debian's python3-venv), of which DIR/lib keeps
# libmkl_rt, the GNU OpenMP and sequential threading layers, the LP64 interface and the CPU
# kernels (no ScaLAPACK, BLACS, TBB or Intel OpenMP layers: mingpt runs MKL on libgomp). The
# version is pinned so that every machine measures the same library. Idempotent: DIR/.ready
# names the pin of a finished one.
#   exit 0: DIR is ready
#   exit 1: it could not be made (no python3-venv, PyPI unreachable); says why. mingpt builds,
#           runs and passes its tests without it (MKL is then simply not a candidate).
dir=${1:?usage: mkl.sh DIR}
py=${PYTHON:-/usr/bin/python3}
pin="mkl==2026.2.0"
[ -f "$dir/.ready" ] && [ "$(cat "$dir/.ready")" = "$pin" ] && exit 0
rm -rf "$dir"
mkdir -p "$dir" || exit 1
tmp="$dir/.tmp"
"$py" -m venv "$tmp/venv" || { echo "mkl: $py cannot create a venv (apt-get install python3-venv)"; rm -rf "$dir"; exit 1; }
"$tmp/venv/bin/pip" download --disable-pip-version-check --no-input -q --no-deps -d "$tmp/wheel" "$pin" \
  || { echo "mkl: pip download $pin failed (PyPI unreachable?); MKL stays off"; rm -rf "$dir"; exit 1; }
"$tmp/venv/bin/python" - "$tmp/wheel" "$dir/lib" <<'PY' || { echo "mkl: cannot unpack the wheel"; rm -rf "$dir"; exit 1; }
import glob, os, re, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
skip = re.compile(r"blacs|scalapack|cdft|tbb_thread|intel_thread|ilp64")
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if "/lib/" in n and base.startswith("libmkl_") and ".so" in base and not skip.search(base):
            with z.open(n) as src, open(os.path.join(out, base), "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$tmp"
ls "$dir"/lib/libmkl_rt.so.* >/dev/null 2>&1 || { echo "mkl: no libmkl_rt in the wheel"; rm -rf "$dir"; exit 1; }
printf '%s\n' "$pin" > "$dir/.ready"
echo "mkl: $dir ready ($pin: $(du -sh "$dir/lib" | cut -f1))"
