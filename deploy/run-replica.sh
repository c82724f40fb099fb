#!/bin/sh
# One replica of the app: exactly `streamlit run app.py`, with the settings of a server (the Docker image's
# command, and what serve.sh starts N times). Usage: deploy/run-replica.sh [PORT] [ADDRESS]
#   headless, no file watcher, no usage statistics, and error details hidden from learners (a page never
#   shows a traceback by design; if one slipped through, the learner sees a short notice, the log the rest).
# The repository's .streamlit/config.toml (theme, toolbar) applies as it does to `streamlit run app.py`.
set -eu
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m streamlit run app.py \
  --server.port "${1:-8501}" --server.address "${2:-0.0.0.0}" \
  --server.headless true --server.fileWatcherType none --server.runOnSave false \
  --browser.gatherUsageStats false --client.showErrorDetails none
