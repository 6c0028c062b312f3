#!/bin/sh
# Replays envyard's recipe from the project root on a Debian machine with Python 3.11.2 at /usr/bin/python3.
set -eu
# interpreter: host 3.11.2
/usr/bin/python3 -m venv /opt/venv
# project metadata; extras test
/opt/venv/bin/python -m pip install --disable-pip-version-check --no-input -e '.[test]'
# test runner pytest
/opt/venv/bin/python -m pip install --disable-pip-version-check --no-input pytest
