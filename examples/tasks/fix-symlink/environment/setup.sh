#!/bin/bash
# Creates /app/releases with several release directories plus some entries that are not releases, and a
# broken /app/current symlink pointing at a release that was deleted.
set -euo pipefail
mkdir -p /app/releases
for v in 0.12.1 1.2.0 1.9.3 1.9.12 1.10.0 1.10.2 2.0.0-rc.1; do
    mkdir -p "/app/releases/$v/bin"
    printf '%s\n' "$v" > "/app/releases/$v/VERSION"
    printf '#!/bin/sh\necho "app %s"\n' "$v" > "/app/releases/$v/bin/app"
    chmod 755 "/app/releases/$v/bin/app"
done
mkdir -p /app/releases/backup
printf 'old backups\n' > /app/releases/backup/NOTE
printf 'Release directories are named MAJOR.MINOR.PATCH.\n' > /app/releases/README
ln -s releases/1.8.0 /app/current
