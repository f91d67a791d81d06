# mk/mutants.mk — `make mutants`: mutation testing (tests/mutants.sh; docs/mutants.md).
#
# Applies each mutant of tests/mutants.txt (a flipped sign, a dropped call, an off-by-one, ...)
# to a private copy of the source in $(B)/mutants/src, rebuilds what its tests need there and
# runs them; prints a table of which test caught each mutant and the total time, and fails when a
# mutant survives, no longer applies (stale) or no longer compiles. Never part of `make test`.
#
#   make mutants                          every mutant
#   make mutants MUTANTS_ONLY=id1,id2     only these
#   make mutants MUTANTS_ARGS=--no-baseline   skip running the tests on the unmutated copy first
MUTANTS_ONLY ?=
MUTANTS_ARGS ?=

.PHONY: mutants
mutants: deps data
	@MUTANTS_ONLY='$(MUTANTS_ONLY)' MUTANTS_DIR='$(abspath $(B))/mutants' bash tests/mutants.sh $(MUTANTS_ARGS)
