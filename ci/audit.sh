#!/usr/bin/env bash
# The main command: set up, build, and audit every shipped fixture on every backend this machine has.
#   ci/audit.sh [qgold audit options]     e.g. ci/audit.sh --format fp16 --json audit.json
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
step "set-up"
ci/setup.sh
step "build (preset default)"
configure_build default >/dev/null
step "qgold list"
build/bin/qgold list
step "qgold audit"
build/bin/qgold audit "$@"
