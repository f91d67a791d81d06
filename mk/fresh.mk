# mk/fresh.mk — `make fresh-check`: the README's two commands (`make run`, `make test`) in a fresh
# minimal Debian root, as a new user on a new machine would run them (tests/fresh_machine.sh;
# root only). .ci/run runs it; FRESH_ARGS passes other commands ("make run" only, say).
FRESH_ARGS ?=
.PHONY: fresh-check
fresh-check:
	@bash tests/fresh_machine.sh $(FRESH_ARGS)
