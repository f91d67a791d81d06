# mk/plot.mk — loss plots (report/), included by the Makefile.
#
# report/*.c (reading run directories, `mingpt plot`, `mingpt runs`, a run's loss.svg) is in
# libmingpt.a, except report/plot_cairo.c, the drawing: it is a shared library,
# build/libmingpt_plot.so, linked with cairo (Debian libcairo2-dev), that ./mingpt dlopens only
# when it draws, so that `--cfg job` and every other command never load cairo (report/plot.h).
DEB_PKGS += libcairo2-dev
PLOT_SO  := $(B)/libmingpt_plot.so

$(B)/report/plot.o: CFLAGS += -DMINGPT_PLOT_LIB='"$(B)/libmingpt_plot.so"'

$(PLOT_SO): report/plot_cairo.c report/plot.h mk/plot.mk
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fopenmp,$(CFLAGS)) $(shell pkg-config --cflags cairo) -fPIC -shared -o $@ $< \
	    $(shell pkg-config --libs cairo) -lm

mingpt: | $(PLOT_SO)
EXTRA_BUILD += $(PLOT_SO)
