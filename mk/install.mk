# mk/install.mk — make install / make uninstall, included by the Makefile.
#
#   make install PREFIX=/usr/local [DESTDIR=/stage]     (PREFIX defaults to /usr/local)
#   make uninstall PREFIX=/usr/local [DESTDIR=/stage]   removes exactly what install wrote
#
# The installed layout, which the binary finds relative to itself (so any PREFIX works and the
# tree can be moved): config/lib_path.h for the libraries, config/search_path.h for the configs.
#   $(PREFIX)/bin/mingpt
#   $(PREFIX)/lib/mingpt/libmingpt_{cuda,mpi,plot}.so  the dlopen'ed libraries this build has
#   $(PREFIX)/share/mingpt/*.yaml                     the shipped configs
#   $(PREFIX)/share/man/man1/mingpt.1                 docs/mingpt.1
#   $(PREFIX)/share/bash-completion/completions/mingpt  `mingpt -sc install=bash`
#   $(PREFIX)/share/mingpt/install-manifest           every file above: what uninstall removes
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL_CONFIGS := gpt2_train_cfg.yaml char_cpu.yaml
INSTALL_LIBS    := libmingpt_cuda.so libmingpt_mpi.so libmingpt_plot.so
INSTALL_MANIFEST = $(PREFIX)/share/mingpt/install-manifest

.PHONY: install uninstall
# The recipe lists each file it writes in the manifest (PREFIX paths, without DESTDIR).
install: mingpt
	@set -e; case "$(PREFIX)" in /*) ;; *) echo "install: PREFIX must be absolute (got '$(PREFIX)')" >&2; exit 2;; esac; \
	root="$(DESTDIR)$(PREFIX)"; list=$$(mktemp); trap 'rm -f "$$list"' EXIT; \
	put() { install -D -m "$$1" "$$2" "$$root/$$3"; echo "$(PREFIX)/$$3" >> "$$list"; echo "  $(PREFIX)/$$3"; }; \
	echo "install: into $(DESTDIR)$(PREFIX)"; \
	put 755 mingpt bin/mingpt; \
	for l in $(INSTALL_LIBS); do if [ -f "$(B)/$$l" ]; then put 755 "$(B)/$$l" "lib/mingpt/$$l"; fi; done; \
	for c in $(INSTALL_CONFIGS); do put 644 "$$c" "share/mingpt/$$c"; done; \
	put 644 docs/mingpt.1 share/man/man1/mingpt.1; \
	./mingpt --shell-completion install=bash > "$$list.bash"; \
	put 644 "$$list.bash" share/bash-completion/completions/mingpt; rm -f "$$list.bash"; \
	echo "$(INSTALL_MANIFEST)" >> "$$list"; \
	install -D -m 644 "$$list" "$(DESTDIR)$(INSTALL_MANIFEST)"

# Removes the files the manifest lists (each must lie under PREFIX: the manifest is a file,
# not trusted), then mingpt's own directories when they are empty.
uninstall:
	@set -e; m="$(DESTDIR)$(INSTALL_MANIFEST)"; \
	if [ ! -f "$$m" ]; then echo "uninstall: nothing to remove ($$m not found: mingpt is not installed in $(DESTDIR)$(PREFIX))"; exit 0; fi; \
	bad=0; while IFS= read -r f; do \
	  case "$$f" in "$(PREFIX)"/*) case "$$f" in *..*) bad=1; echo "uninstall: skipping '$$f' ($$m: a path with ..)" >&2; continue;; esac;; \
	  *) bad=1; echo "uninstall: skipping '$$f' ($$m: not under $(PREFIX))" >&2; continue;; esac; \
	  if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then rm -f "$(DESTDIR)$$f"; echo "  removed $$f"; fi; \
	done < "$$m"; rm -f "$$m"; \
	rmdir "$(DESTDIR)$(PREFIX)/lib/mingpt" "$(DESTDIR)$(PREFIX)/share/mingpt" 2>/dev/null || true; \
	exit $$bad
