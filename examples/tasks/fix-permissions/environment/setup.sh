#!/bin/bash
# Creates /app/run.sh and /app/status.txt as if saved by a Windows editor (CRLF line endings), and leaves
# run.sh without its execute bit.
set -euo pipefail
cat > /app/run.sh <<'EOF'
#!/bin/bash
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
status=$(cat "$here/status.txt")
if [ "$status" = "ready" ]; then
    echo ok
else
    echo "not ready: status is '$status'" >&2
    exit 1
fi
EOF
printf 'ready\n' > /app/status.txt
sed -i 's/$/\r/' /app/run.sh /app/status.txt
chmod 644 /app/run.sh /app/status.txt
