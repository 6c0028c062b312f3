#!/bin/bash
# Verifier for git-commit. The first commit's id is deterministic (setup.sh fixes dates and identity), so
# any rewrite of it is detected; notes.txt's blob id is fixed too.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

initial=732b3e60058c69b1eed7f32685f18ba9f31619d1
notes_blob=7433606007b5328219465f05467cfa4451e259d2
g() { git -C /app/repo -c safe.directory='*' "$@"; }

[ -d /app/repo/.git ] || fail "/app/repo is not a git repository"
[ "$(g rev-parse --abbrev-ref HEAD 2>/dev/null)" = main ] || fail "HEAD is not on branch main"
[ "$(g rev-list --count HEAD 2>/dev/null)" = 2 ] || fail "expected exactly 2 commits, got $(g rev-list --count HEAD 2>&1)"
[ "$(g rev-parse HEAD~1 2>/dev/null)" = "$initial" ] || fail "the original commit was rewritten or replaced"
[ "$(g log -1 --format=%B HEAD)" = "add notes" ] || fail "commit message is '$(g log -1 --format=%B HEAD)'"
[ "$(g rev-list --parents -n 1 HEAD | wc -w)" = 2 ] || fail "the new commit must have exactly one parent"
changes=$(g diff-tree --no-commit-id --name-status -r HEAD~1 HEAD)
[ "$changes" = "$(printf 'A\tnotes.txt')" ] || fail "the new commit must only add notes.txt, it has: $changes"
[ "$(g rev-parse HEAD:notes.txt 2>/dev/null)" = "$notes_blob" ] || fail "committed notes.txt has different content"
[ -z "$(g status --porcelain 2>&1)" ] || fail "working tree is not clean: $(g status --porcelain 2>&1 | head -5)"

echo 1 > /logs/verifier/reward.txt
echo PASS
