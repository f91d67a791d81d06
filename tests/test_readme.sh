#!/usr/bin/env bash
# tests/test_readme.sh — the README stays a user's manual and the documentation's links hold
# (static check):
#   * README.md has at most 350 lines (the details live in docs/*.md);
#   * every relative link or image in README.md and docs/*.md, `[text](target)`, names a file
#     that exists (relative to the page), and a `#fragment` into a Markdown page names one of
#     its headings (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens);
#   * no page says "issue N": the pages describe what mingpt does, not its tracker;
#   * the README names no test file (tests/...): those belong in docs/testing.md.
# Links inside code blocks and code spans are not links and are not checked.
cd "$(dirname "$0")/.." && source tests/lib.sh
export LC_ALL=C
MAX_LINES=350
PAGES=(README.md docs/*.md)

# the page's text without fenced code blocks and code spans, one line per input line
prose() {
  awk '/^[ \t]*```/ { fence = !fence; print ""; next }
       fence { print ""; next }
       { gsub(/``[^`]*``/, ""); gsub(/`[^`]*`/, ""); print }' "$1"
}

# the anchors of a page's headings, one per line (outside code blocks; a code span in a heading
# counts as its text, as on GitHub)
anchors() {
  awk '/^[ \t]*```/ { fence = !fence; next }
       !fence && /^##?#?#?#?#?[ \t]/ { h = $0; sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#*[ \t]*$/, "", h)
         h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
         print (seen[h]++ ? h "-" (seen[h] - 1) : h) }' "$1"
}

# 1. length
n=$(wc -l < README.md)
if [ "$n" -le "$MAX_LINES" ]; then ok "README.md has $n lines (at most $MAX_LINES)"
else bad "README.md has $n lines, more than $MAX_LINES: move details to docs/"; fi

# 2. relative links
links=0; broken=""
for page in "${PAGES[@]}"; do
  dir=$(dirname "$page")
  while IFS= read -r target; do
    [ -n "$target" ] || continue
    case "$target" in *://*|mailto:*) continue ;; esac
    links=$((links+1))
    file=${target%%#*}; frag=""; [ "$target" != "$file" ] && frag=${target#*#}
    if [ -z "$file" ]; then path=$page; else path=$dir/$file; fi
    if [ ! -e "$path" ]; then broken+="$page: ($target): no file $path"$'\n'; continue; fi
    if [ -n "$frag" ] && [[ "$path" == *.md ]] && ! anchors "$path" | grep -qxF -- "$frag"; then
      broken+="$page: ($target): $path has no heading with the anchor #$frag"$'\n'
    fi
  done < <(prose "$page" | grep -o '\]([^) ]*' | sed 's/^](//; s/^<//; s/>$//')
done
if [ -z "$broken" ]; then ok "$links relative links in README.md and docs/*.md resolve"
else bad "links that do not resolve" "${broken%$'\n'}"; fi

# 3. issue numbers
hits=$(grep -niE 'issues? *#?[0-9]' "${PAGES[@]}")
if [ -z "$hits" ]; then ok "no issue numbers in README.md or docs/*.md"
else bad "issue numbers in the documentation" "$hits"; fi

# 4. no test files named in the README
hits=$(grep -nE 'tests/|\btest_[a-z0-9_]+\.(sh|c|py)\b' README.md)
if [ -z "$hits" ]; then ok "README.md names no test file"
else bad "README.md names test files (they belong in docs/testing.md)" "$hits"; fi

finish
