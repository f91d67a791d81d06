# mk/python.mk — the Python environment of the export test (tests/test_export.sh): build/pyenv, a
# venv over Debian's python3-torch with `safetensors` from PyPI (tests/tools/pyenv.sh). Built by
# `make test`; when PyPI cannot be reached, build/pyenv/.offline says why and the test skips its
# PyTorch checks with that message.
PYENV := build/pyenv
.PHONY: pyenv
pyenv:
	@sh tests/tools/pyenv.sh $(PYENV)
EXTRA_BUILD += pyenv
