#!/usr/bin/env bash
# tests/test_bad_input_table.sh — the bad-input table of docs/robustness.md and the tests agree
# (static check).
#
# The table is the table of docs/robustness.md whose header row starts with `| ID |`; each row is
#   | ID | what the input is | FRAGMENT | CODE |
# (FRAGMENT may be in backticks; `\|` is a literal pipe). Each row must be exactly one
# `bad_input ID CODE 'FRAGMENT' -- ...` call in tests/*.sh or tests/*/*.sh, with the same CODE
# and FRAGMENT, and every such call must have a row. Calls must keep ID, CODE and FRAGMENT
# literal on the call line (tests/lib.sh). BAD_INPUT_TABLE overrides the table's file.
cd "$(dirname "$0")/.."
. tests/lib.sh
TABLE=${BAD_INPUT_TABLE:-docs/robustness.md}
SEP=$'\x1f'   # field separator of the extracted rows (cannot occur in a line of text)

# table rows -> ID SEP CODE SEP FRAGMENT SEP LINE; malformed rows -> "!" SEP LINE SEP reason
table_rows() {
  awk -v sep="$SEP" '
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    function unquote(s,   m) {        # `x`, ``x``, `` `x` `` -> x
      if (match(s, /^`+/)) { m = RLENGTH
        if (length(s) > 2 * m && substr(s, length(s) - m + 1) == substr(s, 1, m)) {
          s = substr(s, m + 1, length(s) - 2 * m); if (m > 1) s = trim(s) } }
      return s }
    # split a table line on unescaped pipes into cell[1..n]; returns n
    function cells(line,   i, c, n, cur) {
      n = 0; cur = ""; line = trim(line); sub(/^\|/, "", line); sub(/\|$/, "", line)
      for (i = 1; i <= length(line); i++) { c = substr(line, i, 1)
        if (c == "\\" && substr(line, i + 1, 1) == "|") { cur = cur "|"; i++ }
        else if (c == "|") { cell[++n] = trim(cur); cur = "" }
        else cur = cur c }
      cell[++n] = trim(cur); return n }
    state == 0 && /^[ \t]*\|[ \t]*ID[ \t]*\|/ { state = 1; found = 1; next }      # header
    state == 1 { state = 2; next }                                            # |---|---|
    state == 2 && !/^[ \t]*\|/ { state = 3 }                                  # table ends
    state == 2 { n = cells($0)
      if (n != 4) { print "!" sep NR sep "has " n " cells, not 4"; next }
      frag = unquote(cell[3])
      if (cell[1] !~ /^[a-z0-9][a-z0-9-]*$/) { print "!" sep NR sep "ID \"" cell[1] "\" is not kebab-case"; next }
      if (cell[4] !~ /^[0-9]+$/) { print "!" sep NR sep "CODE \"" cell[4] "\" is not a number"; next }
      if (frag == "") { print "!" sep NR sep "empty FRAGMENT"; next }
      print cell[1] sep cell[4] sep frag sep NR }
    END { if (!found) print "?" }' "$TABLE"
}

# bad_input calls -> ID SEP CODE SEP FRAGMENT SEP FILE:LINE; non-literal calls -> "!" SEP FILE:LINE
test_calls() {
  local f
  for f in tests/*.sh tests/*/*.sh; do
    [ "$f" = tests/lib.sh ] || [ "$f" = tests/test_bad_input_table.sh ] && continue
    awk -v sep="$SEP" -v file="$f" '
      /^[ \t]*#/ { next }
      !/(^|[^a-zA-Z0-9_-])bad_input[ \t]/ { next }
      /bad_input[ \t]*\(\)/ { next }
      { line = $0; sub(/.*(^|[^a-zA-Z0-9_-])bad_input[ \t]+/, "", line)
        # ID CODE '\''FRAGMENT'\'' --   (a '\''\'\'''\'' inside FRAGMENT is a quote)
        if (match(line, /^[a-z0-9][a-z0-9-]*[ \t]+[0-9]+[ \t]+'\''([^'\'']|'\''\\'\'''\'')*'\''[ \t]+--([ \t]|$)/)) {
          id = line; sub(/[ \t].*/, "", id)
          rest = substr(line, length(id) + 1); sub(/^[ \t]+/, "", rest)
          code = rest; sub(/[ \t].*/, "", code)
          rest = substr(rest, length(code) + 1); sub(/^[ \t]+'\''/, "", rest)
          frag = ""
          while (1) {
            i = index(rest, "'\''")
            if (substr(rest, i, 4) == "'\''\\'\'''\''") { frag = frag substr(rest, 1, i - 1) "'\''"; rest = substr(rest, i + 4) }
            else { frag = frag substr(rest, 1, i - 1); break }
          }
          print id sep code sep frag sep file ":" FNR
        } else print "!" sep file ":" FNR sep $0 }' "$f"
  done
}

rows=$(table_rows) || { bad "cannot read $TABLE"; finish; exit; }
if [ "$rows" = "?" ]; then
  bad "$TABLE has a bad-input table (a table whose header row starts with '| ID |')"
  finish; exit
fi
calls=$(test_calls)

# malformed rows and calls
while IFS=$SEP read -r mark where what; do
  [ "$mark" = "!" ] && bad "$TABLE:$where: malformed bad-input row: $what"
done <<<"$rows"
while IFS=$SEP read -r mark where what; do
  [ "$mark" = "!" ] && bad "$where: bad_input call without a literal ID, CODE and 'FRAGMENT'" "$what"
done <<<"$calls"
rows=$(grep -v "^[!]" <<<"$rows"); calls=$(grep -v "^[!]" <<<"$calls")

# duplicates
for d in $(cut -d"$SEP" -f1 <<<"$rows" | sort | uniq -d); do bad "ID $d has more than one table row"; done
for d in $(cut -d"$SEP" -f1 <<<"$calls" | sort | uniq -d); do
  bad "ID $d is used by more than one bad_input call" "$(grep "^$d$SEP" <<<"$calls" | cut -d"$SEP" -f4)"
done

# each row has its call with the same code and fragment, and each call has a row
n=0
while IFS=$SEP read -r id code frag line; do
  [ -n "$id" ] || continue
  n=$((n+1))
  call=$(awk -F "$SEP" -v id="$id" '$1 == id' <<<"$calls" | head -1)
  if [ -z "$call" ]; then bad "row $id ($TABLE:$line) has no bad_input call in tests/"; continue; fi
  IFS=$SEP read -r _ ccode cfrag cwhere <<<"$call"
  [ "$ccode" = "$code" ] || bad "row $id: the table says exit $code, $cwhere says $ccode"
  [ "$cfrag" = "$frag" ] || bad "row $id: the table's fragment differs from $cwhere" "table: $frag
test:  $cfrag"
done <<<"$rows"
while IFS=$SEP read -r id _ _ where; do
  [ -n "$id" ] || continue
  awk -F "$SEP" -v id="$id" '$1 == id { f = 1 } END { exit !f }' <<<"$rows" || bad "bad_input $id ($where) has no row in $TABLE"
done <<<"$calls"
[ "$FAIL" -eq 0 ] && ok "$TABLE's bad-input table: $n rows, each one bad_input call with the same exit code and fragment"
finish
