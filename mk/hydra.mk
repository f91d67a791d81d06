# mk/hydra.mk — the Hydra-style command line (config/hydra.c, config/cfg_interp.c, app/hydra_app.c).
#
# Its tests need no hook: tests/test_hydra.c (unit) and tests/test_hydra_*.sh (CLI checklist of
# ../shared/reference/hydra_semantics.md) are picked up by `make unit` / `make e2e`.
#   make bench-cfg-job   median time of `./mingpt --cfg job` (target < 20 ms); part of `make bench`
#   make test-hydra      only the Hydra tests (for work on this part)

BENCH_TARGETS += bench-cfg-job

.PHONY: bench-cfg-job test-hydra

bench-cfg-job: mingpt
	@bash bench/cfg_job.sh ./mingpt

test-hydra: mingpt $(B)/tests/test_hydra $(B)/tests/test_config
	$(B)/tests/test_hydra
	$(B)/tests/test_config
	@fail=0; for t in tests/test_hydra_*.sh; do bash $$t || fail=1; done; [ $$fail -eq 0 ]
