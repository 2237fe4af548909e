#!/usr/bin/env bash
# The tracing libraries benchmarks/overhead.py compares @boundary with, in a virtualenv of their own (they pull
# OpenTelemetry instrumentation packages and pins that conflict with the dev environment's), plus this package.
#
#   bash benchmarks/peers_env.sh [VENV_DIR]      default VENV_DIR: .venv-bench-peers
#
# PYTHON picks the interpreter (default python3: use the one .venv was made with, so both sides run the same
# Python). The peer versions are pinned below and can be overridden from the environment. A peer that does not
# install is reported and skipped (benchmarks/overhead.py then prints "not installed" for it); the script fails
# only when the virtualenv or this package cannot be set up.
set -euo pipefail

VENV_DIR=${1:-.venv-bench-peers}
PYTHON=${PYTHON:-python3}
TRACELOOP_VERSION=${TRACELOOP_VERSION:-0.62.4}
OPENINFERENCE_VERSION=${OPENINFERENCE_VERSION:-0.1.72}
OPENINFERENCE_SEMCONV_VERSION=${OPENINFERENCE_SEMCONV_VERSION:-0.1.42}
AGENT_CHRONICLE_VERSION=${AGENT_CHRONICLE_VERSION:-1.1.1}

PEERS=(
	"traceloop-sdk==$TRACELOOP_VERSION"
	"openinference-instrumentation==$OPENINFERENCE_VERSION openinference-semantic-conventions==$OPENINFERENCE_SEMCONV_VERSION"
	"agent-chronicle==$AGENT_CHRONICLE_VERSION"
)

cd "$(dirname "$0")/.."
"$PYTHON" -m venv "$VENV_DIR"
pip=("$VENV_DIR/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip

# All in one resolution first, so pip picks one consistent set; this package, then one peer at a time when that fails.
# shellcheck disable=SC2086 # each entry is one or more requirement specifiers
if ! "${pip[@]}" install -q -e . ${PEERS[*]}; then
	echo "peers_env.sh: the peers do not install together; trying them one by one" >&2
	"${pip[@]}" install -q -e .
	for peer in "${PEERS[@]}"; do
		# shellcheck disable=SC2086
		if ! "${pip[@]}" install -q $peer; then
			echo "peers_env.sh: $peer did not install; the benchmark reports it as not installed" >&2
		fi
	done
fi
"${pip[@]}" check || echo "peers_env.sh: pip check reports conflicts (above); the benchmark runs regardless" >&2
