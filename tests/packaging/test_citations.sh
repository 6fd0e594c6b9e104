#!/usr/bin/env bash
# Every document the tree cites is in it: each FILE.md named in a source,
# header, script or document resolves to a file of the repository (as
# written, relative to the root or the citing file; a bare spec file name,
# "spec tensors.md §7.1", is in docs/spec/; the package installs docs/ in
# /usr/share/doc/libdml).
#   test_citations.sh SOURCE_DIR
set -euo pipefail
cd "$1"
checked=0
missing=0
while IFS=: read -r file name; do
  checked=$((checked + 1))
  installed=${name#/}
  installed=${installed#usr/share/doc/libdml/} # a document as the package installs it
  for candidate in "$name" "$(dirname "$file")/$name" "docs/$name" "docs/spec/$name" "$installed" "docs/$installed"; do
    [ -f "$candidate" ] && continue 2
  done
  echo "FAIL: $file cites $name, which is not in the repository"
  missing=$((missing + 1))
done < <(git ls-files -z -- ':!*.json' ':!docs/spec/*' ':!tests/packaging/test_citations.sh' |
  xargs -0 grep -oP '(?<![$\w/.-])[\w./-]*[\w-]+\.md\b' | sort -u) # not "$variable/x.md"
echo "$checked citations checked, $missing missing"
[ "$checked" -gt 0 ] && [ "$missing" = 0 ] && echo "1 passed, 0 failed" && exit 0
echo "0 passed, 1 failed"
exit 1
