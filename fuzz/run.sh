#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), one after the other, keeping the corpus
# in fuzz/corpus/ and any crash in fuzz/artifacts/. Needs nightly and `cargo install cargo-fuzz`.
#   fuzz/run.sh 300            # five minutes per target
#   fuzz/run.sh 60 parse_line  # one target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
# LeakSanitizer reports glibc's per-thread destructor record of a thread still exiting (fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
failed=()
for t in "${targets[@]}"; do
  echo "== $t: ${seconds}s"
  # Seeds: the bundled recordings, one line per file for the line-level targets.
  mkdir -p "fuzz/corpus/$t"
  if [ -z "$(ls -A "fuzz/corpus/$t")" ]; then
    case "$t" in
      parse_line|token_arrays)
        split -l 1 -a 4 assets/demo/example.jsonl "fuzz/corpus/$t/example-" ;;
      load_*)
        { printf '\0'; cat assets/demo/example.jsonl; } > "fuzz/corpus/$t/example" ;;
      import_*)
        # The importer's test fixtures (real logs), each behind a mode byte.
        src="${t#import_}"
        for f in tests/fixtures/import/"${src//_/-}"/*; do
          [ -f "$f" ] && case "$f" in *LICENSE|*.md|*.py) ;; *)
            { printf '\0'; cat "$f"; } > "fuzz/corpus/$t/$(basename "$f")" ;; esac
        done ;;
    esac
  fi
  # A finding stops that target (its input is in fuzz/artifacts/$t/); the others still run.
  if ! cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
  then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "findings in: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
