# mk/dist.mk — data-parallel training (dist/), included by the Makefile.
#
# dist/comm.c (the single-process communicator and launcher detection) is in libmingpt.a.
# The MPI communicator (dist/comm_mpi.c) is a shared library, build/libmingpt_mpi.so, that
# ./mingpt dlopens only when mpirun/srun started it (and for --version, which reads its
# version without initialising MPI): a plain ./mingpt never loads libmpi
# (which costs tens of milliseconds at start-up) and never calls MPI_Init.
MPICC    ?= mpicc
MPI_SO   := $(B)/libmingpt_mpi.so

$(B)/dist/comm.o: CFLAGS += -DMINGPT_MPI_LIB='"$(B)/libmingpt_mpi.so"'

$(MPI_SO): dist/comm_mpi.c dist/comm.h config/clock.h mk/dist.mk
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(filter-out -fopenmp,$(CFLAGS)) -fPIC -shared -pthread -o $@ $<

mingpt: | $(MPI_SO)

# ---------------------------------------------------------------- tests
# tests/ddp_check.c drives train_step under mpirun (it loads build/libmingpt_mpi.so like
# ./mingpt does); tests/test_ddp.sh compares runs on 1, 2 and 3 ranks and the real binary's
# resume, stop and failure behaviour; tests/ddp/test_ddp_faults.sh what a failing job says and
# leaves in summary.json (collective timeouts, a killed rank) and the mpirun kill-grace warning.
DDP_CHECK := $(B)/tests/ddp_check
$(DDP_CHECK): tests/ddp_check.c $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(B)/libmingpt.a $(LDLIBS)
-include $(DDP_CHECK).d
# tests/test_ddp_check.c runs it
$(B)/tests/test_ddp_check: | $(DDP_CHECK)

# tests/ddp/mpi_fault.c: a fault (a rank killed or stopped inside its N-th parameter all-gather)
# LD_PRELOADed under mpirun by tests/test_zero.sh; no sanitizer flags (it is preloaded before the
# sanitizer runtime, which the test tells ASan to accept)
MPI_FAULT_SO := $(B)/tests/mpi_fault.so
$(MPI_FAULT_SO): tests/ddp/mpi_fault.c mk/dist.mk
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl

.PHONY: ddp-test
EXTRA_BUILD += $(DDP_CHECK) $(MPI_SO) $(MPI_FAULT_SO)
EXTRA_TESTS += ddp-test
ddp-test: mingpt $(DDP_CHECK) $(MPI_SO) $(MPI_FAULT_SO) data $(EMU_SO)
	@bash tests/ddp/test_ddp.sh
	@bash tests/ddp/test_ddp_faults.sh
