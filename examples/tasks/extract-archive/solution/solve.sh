#!/bin/bash
set -euo pipefail
mkdir -p /app/out
tar -xzpf /app/bundle.tar.gz -C /app/out
