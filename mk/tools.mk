# mk/tools.mk — small programs the tests use (tests/tools/*.c), built by `make test`.
#   $(B)/tests/tools/snapedit   edits snapshot records and recomputes the CRC (crafted snapshots)
TOOLS_SRC := $(sort $(wildcard tests/tools/*.c))
TOOLS_BIN := $(TOOLS_SRC:tests/tools/%.c=$(B)/tests/tools/%)
EXTRA_BUILD += $(TOOLS_BIN)

$(B)/tests/tools/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lz
