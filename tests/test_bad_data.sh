#!/usr/bin/env bash
# Bad corpora and data paths (the bad-input table, docs/robustness.md): each gets a message
# naming the path and what is wrong with it, and exit code 2, before any model is built; none
# blocks or reads without end (a FIFO, /dev/zero), none allocates past the corpus limit (a gzip
# bomb).
cd "$(dirname "$0")/.." && source tests/lib.sh

DATA=$WORK/tiny.txt
printf 'hello world, this is a small corpus for the corpus reader.\n%.0s' {1..8} > "$DATA"
small=(--config-name char_cpu data_config.path=$DATA data_config.block_size=8 gpt_config.n_layer=1
       gpt_config.n_head=2 gpt_config.n_embd=8 trainer_config.batch_size=2 trainer_config.max_iters=1
       trainer_config.snapshot_path=$WORK/s.bin hydra.run.dir=$WORK/run)
M() { timeout 60 "$MINGPT" "${small[@]}" "$@"; }   # timeout: a blocked read fails the case, not the suite

# The data path must be a regular file (or a .gz one); anything else is refused before opening.
bad_input data-missing 2 'data_config.path: cannot open' -- M data_config.path=$WORK/absent.txt
bad_input data-dir 2 'is a directory, not a regular file' -- M data_config.path=$WORK
mkfifo $WORK/fifo
bad_input data-fifo 2 'is a FIFO (named pipe), not a regular file' -- M data_config.path=$WORK/fifo
bad_input data-dev-zero 2 '/dev/zero: is a character device, not a regular file' -- M data_config.path=/dev/zero

# Too little text.
: > $WORK/empty.txt
bad_input data-empty 2 'empty.txt: empty file' -- M data_config.path=$WORK/empty.txt
printf 'a' > $WORK/one.txt
bad_input data-one-char 2 'block_size (8) must be smaller than the number of characters (1) in' -- M data_config.path=$WORK/one.txt
printf 'a%.0s' {1..100} > $WORK/same.txt
bad_input data-one-distinct 2 'holds only one distinct character' -- M data_config.path=$WORK/same.txt
bad_input data-truncate-short 2 'must be smaller than the number of characters (4 of 472 after truncate=0.01)' -- M data_config.truncate=0.01

# Invalid UTF-8: the class and the byte offset of the sequence (in the decompressed text for .gz).
printf 'abc\n\xff\xfedef\n' > $WORK/bad_start.txt
bad_input data-utf8-invalid-start 2 'invalid UTF-8 at byte offset 4 (line 2): invalid start byte' -- M data_config.path=$WORK/bad_start.txt
printf 'hello \xc0\xafworld\n' > $WORK/overlong.txt
bad_input data-utf8-overlong 2 'invalid UTF-8 at byte offset 6 (line 1): overlong encoding' -- M data_config.path=$WORK/overlong.txt
printf 'ab\n\ncd\xed\xa0\x80\n' > $WORK/surrogate.txt
bad_input data-utf8-surrogate 2 'invalid UTF-8 at byte offset 6 (line 3): surrogate code point' -- M data_config.path=$WORK/surrogate.txt
printf 'abcdefghij\xf4\x90\x80\x80' > $WORK/above.txt
bad_input data-utf8-above-max 2 'invalid UTF-8 at byte offset 10 (line 1): code point above U+10FFFF' -- M data_config.path=$WORK/above.txt
printf 'abcdefghij\xe2\x9c' > $WORK/cut.txt
bad_input data-utf8-truncated 2 'invalid UTF-8 at byte offset 10 (line 1): truncated sequence at end of input' -- M data_config.path=$WORK/cut.txt
printf 'abcdefghij\x80' > $WORK/cont.txt
bad_input data-utf8-continuation 2 'invalid UTF-8 at byte offset 10 (line 1): unexpected continuation byte' -- M data_config.path=$WORK/cont.txt
{ cat "$DATA"; printf '\xc3('; } | gzip -c > $WORK/bad.txt.gz
bad_input data-utf8-gz 2 'invalid UTF-8 at byte offset 472 of the decompressed text (line 9)' -- M data_config.path=$WORK/bad.txt.gz

# The corpus limit (MINGPT_MAX_CORPUS_BYTES, default a tenth of physical memory).
bad_input data-over-limit 2 'tiny.txt: 472 bytes is larger than the corpus limit of 400 bytes' -- env MINGPT_MAX_CORPUS_BYTES=400 timeout 60 $MINGPT "${small[@]}"
# A gzip bomb: 1 GiB of zeros in about 1 MB (1024 gzip members); it stops at the limit.
head -c 1048576 /dev/zero | gzip -9 -c > $WORK/m.gz
for _ in 1 2 3 4 5 6 7 8 9 10; do cat $WORK/m.gz $WORK/m.gz > $WORK/m2.gz && mv $WORK/m2.gz $WORK/m.gz; done
mv $WORK/m.gz $WORK/bomb.txt.gz
bad_input data-gzip-bomb 2 'bomb.txt.gz: decompresses to more than the corpus limit of 16777216 bytes' -- env MINGPT_MAX_CORPUS_BYTES=16M timeout 60 $MINGPT "${small[@]}" data_config.path=$WORK/bomb.txt.gz
bad_input data-limit-malformed 2 'is not a size in bytes' -- env MINGPT_MAX_CORPUS_BYTES=lots timeout 60 $MINGPT "${small[@]}"
# The default: a sparse file the size of physical memory is refused from its size, unread.
phys=$(( $(getconf _PHYS_PAGES) * $(getconf PAGESIZE) ))
if truncate -s $phys $WORK/sparse.txt 2>/dev/null; then
  bad_input data-over-default-limit 2 'of physical memory: loading takes up to 5 bytes per byte of text' -- env -u MINGPT_MAX_CORPUS_BYTES timeout 20 $MINGPT "${small[@]}" data_config.path=$WORK/sparse.txt
else
  echo "  note: no sparse file of $phys bytes here; data-over-default-limit not run"
fi
rm -f $WORK/sparse.txt

# A good corpus still trains, with a raised limit and without one.
out=$(env MINGPT_MAX_CORPUS_BYTES=1G timeout 120 $MINGPT "${small[@]}" 2>&1) && grep -q 'Data has 472 characters' <<<"$out" \
  && ok "a good corpus trains under a raised limit" || bad "a good corpus trains under a raised limit" "$out"
no_partial_files $WORK/run "bad data leaves no partial files"
finish
