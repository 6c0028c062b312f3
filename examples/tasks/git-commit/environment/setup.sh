#!/bin/bash
# Creates /app/repo, a git repository on branch main with one commit (fixed dates and identity, so the commit
# id is deterministic), an untracked notes.txt and an ignored scratch.log.
set -euo pipefail
git init -q -b main /app/repo
cd /app/repo
git config user.name "Repo Owner"
git config user.email "owner@example.invalid"
git config commit.gpgsign false
printf '# Demo repository\n\nA tiny repository for practising commits.\n' > README.md
printf '*.log\n' > .gitignore
git add README.md .gitignore
GIT_AUTHOR_DATE="2024-01-02T03:04:05+0000" GIT_COMMITTER_DATE="2024-01-02T03:04:05+0000" \
    git commit -q -m "initial commit"
printf 'Meeting notes\n- ship version 1.0\n- write more tests\n' > notes.txt
printf 'scratch output, ignored by git\n' > scratch.log
