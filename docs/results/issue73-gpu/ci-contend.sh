#!/bin/bash
# readme test beside test-batch-exact's types, the readme with the given OMP_WAIT_POLICY
cd "$(git rev-parse --show-toplevel)"
pol=$1
rm -rf ${TMPDIR:-/tmp}/cc-$pol; mkdir -p ${TMPDIR:-/tmp}/cc-$pol
(OMP_WAIT_POLICY=PASSIVE build/bin/test-batch-exact --gtest_filter='types/*' > ${TMPDIR:-/tmp}/be-$pol.log 2>&1) &
bp=$!
s=$(date +%s.%N)
if [ "$pol" = none ]; then
  EDITSPEC_CACHE=${TMPDIR:-/tmp}/cc-$pol python3 scripts/readme-commands.py --binary build/bin/editspec > ${TMPDIR:-/tmp}/rd-$pol.log 2>&1
else
  OMP_WAIT_POLICY=$pol EDITSPEC_CACHE=${TMPDIR:-/tmp}/cc-$pol python3 scripts/readme-commands.py --binary build/bin/editspec > ${TMPDIR:-/tmp}/rd-$pol.log 2>&1
fi
e=$(date +%s.%N)
echo "readme beside batch-exact, OMP_WAIT_POLICY=$pol: $(echo "$e - $s" | bc) s"
kill $bp 2>/dev/null; wait 2>/dev/null
