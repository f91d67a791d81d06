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
#
# The manifest also lists, as `dir:PATH` lines, the directories install created: those inside
# PREFIX (bin, lib/mingpt, share/man/man1, ...), and with DESTDIR also PREFIX and its parents
# below DESTDIR (a staging tree). A reinstall keeps the earlier install's lines. uninstall
# removes each of them, deepest first, when it is empty, and no other directory.
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
	stop="$(DESTDIR)"; [ -n "$$stop" ] || stop="$(PREFIX)"; stop=$${stop%/}; \
	if [ -f "$(DESTDIR)$(INSTALL_MANIFEST)" ]; then grep '^dir:' "$(DESTDIR)$(INSTALL_MANIFEST)" >> "$$list" || true; fi; \
	newdirs() { d=$$(dirname "$$1"); while [ ! -d "$$d" ] && [ "$$d" != "$$stop" ] && [ "$$d" != / ]; do \
	  echo "dir:$${d#$(DESTDIR)}" >> "$$list"; d=$$(dirname "$$d"); done; }; \
	put() { newdirs "$$root/$$3"; install -D -m "$$1" "$$2" "$$root/$$3"; echo "$(PREFIX)/$$3" >> "$$list"; echo "  $(PREFIX)/$$3"; }; \
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
# not trusted), then the directories install created (dir: lines: inside PREFIX, or with DESTDIR
# PREFIX and its parents) when they are empty, deepest first, and mingpt's own directories.
uninstall:
	@set -e; m="$(DESTDIR)$(INSTALL_MANIFEST)"; \
	if [ ! -f "$$m" ]; then echo "uninstall: nothing to remove ($$m not found: mingpt is not installed in $(DESTDIR)$(PREFIX))"; exit 0; fi; \
	dirs=$$(mktemp); trap 'rm -f "$$dirs"' EXIT; \
	bad=0; while IFS= read -r f; do \
	  case "$$f" in *..*) bad=1; echo "uninstall: skipping '$$f' ($$m: a path with ..)" >&2; continue;; esac; \
	  case "$$f" in dir:*) d=$${f#dir:}; \
	    case "$$d" in "$(PREFIX)"/*) echo "$$d" >> "$$dirs";; \
	    *) case "$(PREFIX)/" in "$$d"/*) if [ -n "$(DESTDIR)" ]; then echo "$$d" >> "$$dirs"; continue; fi;; esac; \
	       bad=1; echo "uninstall: skipping '$$f' ($$m: not a directory install creates)" >&2;; esac; continue;; esac; \
	  case "$$f" in "$(PREFIX)"/*) ;; \
	  *) bad=1; echo "uninstall: skipping '$$f' ($$m: not under $(PREFIX))" >&2; continue;; esac; \
	  if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then rm -f "$(DESTDIR)$$f"; echo "  removed $$f"; fi; \
	done < "$$m"; rm -f "$$m"; \
	rmdir "$(DESTDIR)$(PREFIX)/lib/mingpt" "$(DESTDIR)$(PREFIX)/share/mingpt" 2>/dev/null || true; \
	awk '{ print gsub("/", "/"), $$0 }' "$$dirs" | sort -rn -k1,1 | cut -d' ' -f2- | uniq | while IFS= read -r d; do \
	  if [ -d "$(DESTDIR)$$d" ] && rmdir "$(DESTDIR)$$d" 2>/dev/null; then echo "  removed $$d/"; fi; done; \
	exit $$bad
