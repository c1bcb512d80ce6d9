#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what the tests need, builds,
# and runs every test. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }
if ! need cargo; then
  echo "cargo is required (rustup.rs); it is preinstalled on the project's machines" >&2
  exit 1
fi

# Named segments live in /dev/shm; make sure it is there and writable.
if [ ! -w /dev/shm ]; then
  echo "/dev/shm is not writable: the multi-process tests need POSIX shared memory" >&2
  exit 1
fi

export CARGO_TERM_COLOR=never
cargo build --workspace --all-targets
cargo test --workspace
