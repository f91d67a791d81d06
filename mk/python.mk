# mk/python.mk — the Python environment of the export test (tests/test_export.sh): build/pyenv, a
# venv with NumPy, safetensors and ml_dtypes from PyPI (tests/tools/pyenv.sh; no PyTorch). Built by
# `make test`; a failure to build it fails `make test` (the export test's checks are not optional).
PYENV := build/pyenv
.PHONY: pyenv
pyenv:
	@sh tests/tools/pyenv.sh $(PYENV)
EXTRA_BUILD += pyenv
