# mk/tools.mk — small programs the tests use (tests/tools/), built by `make test`.
#   $(B)/tests/tools/snapedit       edits snapshot records and recomputes the CRC (crafted snapshots)
#   $(B)/tests/tools/logits         a snapshot's logits on fixed tokens (linked with libmingpt.a;
#                                   tests/test_export.sh compares them with PyTorch's)
#   $(B)/tests/tools/slow_fsync.so  LD_PRELOAD shim: fsync sleeps MINGPT_TEST_FSYNC_MS ms (a save that
#                                   lasts long enough to be interrupted; tests/test_snapshot_files.sh)
TOOLS_BIN := $(B)/tests/tools/snapedit $(B)/tests/tools/logits $(B)/tests/tools/slow_fsync.so
EXTRA_BUILD += $(TOOLS_BIN)

$(B)/tests/tools/snapedit: tests/tools/snapedit.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lz
$(B)/tests/tools/logits: tests/tools/logits.c $(B)/libmingpt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(B)/libmingpt.a $(LDLIBS)
# not sanitized: it is preloaded ahead of everything (the test sets verify_asan_link_order=0)
$(B)/tests/tools/slow_fsync.so: tests/tools/slow_fsync.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -shared -fPIC -Wall -Wextra -Werror -o $@ $< -ldl
