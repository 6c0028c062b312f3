#!/bin/bash
# Verifier for extract-archive: /app/out must hold exactly the archive's files with the right content
# (SHA-256 fixed below; setup.sh generates the archive deterministically), the executable bit on
# project/bin/run and the empty directory project/data/empty.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

[ -d /app/out ] || fail "/app/out is missing"
cd /app/out || fail "cannot enter /app/out"

cat > /tmp/expected.sha256 <<'SUMS'
c27f6f7115457eb6f99e663ef28fa89797e803c3678ac6418f11b50a5cc9a842  ./CHANGELOG
4229faca34410ddb5171131ae6f434580a93eb4de5e409616d0d112c12900849  ./assets/fonts/mono.txt
5147f3b564c310acab639e8d8e55930aaa2b5c612994a4927167d3f5ac6bd400  ./assets/logo.txt
6b1724cb4c260d87471f7bcfef8e14c489a9a6aeef3b016fb4f073bf374484b2  ./project/README.md
3f5e4b0f29e8fe3240d177f1d61a0fd806928a944dc6251d944e7ac06b81b6b2  ./project/bin/run
a1f259d4365ed4320c377ce26f5c8c56dcdc9a89e7b641bfd8eabfbbeac86654  ./project/data/table.bin
458a3dd91692f31e78e1a8820b8747eda4f2b6a6884d074c1a7d0a944b5a7e41  ./project/src/main.py
e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  ./project/src/util/__init__.py
0992f2f8cc75665f6907a881df9b42e292cff1e392bc7679e2f4cbd325a698d9  ./project/src/util/helpers.py
SUMS

sha256sum --quiet -c /tmp/expected.sha256 || fail "missing files or wrong content"
# every entry must be a regular file (not a symlink to somewhere else)
while read -r _ path; do
    [ -f "$path" ] && [ ! -L "$path" ] || fail "$path is not a regular file"
done < /tmp/expected.sha256
# exactly these files (and no other non-directory entries)
actual=$(find . ! -type d | LC_ALL=C sort)
wanted=$(awk '{print $2}' /tmp/expected.sha256 | LC_ALL=C sort)
[ "$actual" = "$wanted" ] || fail "the set of entries under /app/out differs from the archive: $(diff <(echo "$wanted") <(echo "$actual") | grep '^[<>]' | head -5 | tr '\n' ' ')"
[ -x project/bin/run ] || fail "project/bin/run lost its execute bit"
[ "$(./project/bin/run)" = "running" ] || fail "project/bin/run does not run"
[ -d project/data/empty ] || fail "empty directory project/data/empty is missing"

echo 1 > /logs/verifier/reward.txt
echo PASS
