#!/usr/bin/env bash
# Installs fabricbench's man pages and bash, zsh and fish completions, generated
# from the binaries' own command-line definitions by fabricbench-docs, under
# PREFIX (default /usr/local):
#   PREFIX/share/man/man1/NAME.1                       man NAME
#   PREFIX/share/bash-completion/completions/NAME      bash-completion loads it on first TAB
#   PREFIX/share/zsh/site-functions/_NAME              on zsh's fpath
#   PREFIX/share/fish/vendor_completions.d/NAME.fish   fish loads it
# fabricbench-docs comes from target/release (cargo build --release), or from
# FABRICBENCH_DOCS=/path/to/fabricbench-docs.
# Usage: scripts/install-docs.sh [PREFIX]
set -euo pipefail
prefix=${1:-/usr/local}
docs=${FABRICBENCH_DOCS:-"$(dirname "$0")/../target/release/fabricbench-docs"}
if [ ! -x "$docs" ]; then
    echo "install-docs.sh: $docs not found: run cargo build --release first, or set FABRICBENCH_DOCS" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$docs" --man "$work/man" --completions "$work/completions" >/dev/null
install -d "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
install -m 644 "$work"/man/*.1 "$prefix/share/man/man1/"
install -m 644 "$work"/completions/bash/* "$prefix/share/bash-completion/completions/"
install -m 644 "$work"/completions/zsh/_* "$prefix/share/zsh/site-functions/"
install -m 644 "$work"/completions/fish/*.fish "$prefix/share/fish/vendor_completions.d/"
# Refresh man's index where man-db keeps one (whatis, apropos); man reads the pages without it.
if command -v mandb >/dev/null; then mandb -q "$prefix/share/man" 2>/dev/null || true; fi
echo "install-docs.sh: $(ls "$work"/man | wc -l) man pages and their completions installed under $prefix"
