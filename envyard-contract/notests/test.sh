#!/bin/sh
set -eu
export VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
/opt/venv/bin/python -m pytest "$@"
