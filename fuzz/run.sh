#!/bin/sh
# Runs one fuzz target (the guide, docs/guide/src/fuzzing.md):
#
#     fuzz/run.sh TARGET [EXECUTIONS]
#
# TARGET is one of trace_file, lackey, strace, sweep_toml, replay_token, run_set,
# saved_search, litmus, script, validation_corpus, machine_file (fuzz/fuzz_targets/TARGET.rs); EXECUTIONS
# defaults to 10000000 (0: until stopped). Installs cargo-fuzz from crates.io if it is missing; needs the
# nightly toolchain (rustup toolchain install nightly). One fuzzing process, in
# the foreground (libFuzzer's default: no -jobs/-workers/-fork, which would start
# children logging to files); each input may take 10 s and 2 GiB (RSS), one
# allocation 1 GiB: beyond that is a finding. The corpus grows in fuzz/corpus/TARGET (seeds committed; new inputs
# are not); a finding is written to fuzz/artifacts/TARGET/ and libFuzzer stops
# with a non-zero exit. Extra arguments after EXECUTIONS go to libFuzzer.
set -eu
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "usage: fuzz/run.sh TARGET [EXECUTIONS] [LIBFUZZER-ARGS...]" >&2
    echo "targets: $(ls fuzz/fuzz_targets | sed 's/\.rs$//' | tr '\n' ' ')" >&2
    exit 2
fi
target=$1
runs=${2:-10000000}
[ "$runs" = 0 ] && runs=-1
[ $# -ge 2 ] && shift 2 || shift 1
if [ ! -f "fuzz/fuzz_targets/$target.rs" ]; then
    echo "fuzz/run.sh: no target '$target'; targets: $(ls fuzz/fuzz_targets | sed 's/\.rs$//' | tr '\n' ' ')" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# Inputs up to 4 KiB, the size of the largest seed (tiny.strace, which the
# import joins with tiny.lackey); 1 KiB for the sweep files (the largest seed is
# 860 bytes), whose grid costs grow fastest with the file.
case $target in
    sweep_toml) max_len=1024 ;;
    # The seeds (four of the corpus's files) are up to 3 KiB; larger entries exist.
    validation_corpus) max_len=8192 ;;
    *) max_len=4096 ;;
esac
# No allocation stacks: the code fuzzed is safe Rust, so AddressSanitizer reports
# nothing that needs them, and recording one at every allocation costs a third
# of the speed of the allocation-heavy readers.
export ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=0}"
# Coverage of new inputs goes to a scratch copy, so that the committed seed
# corpus stays as it is.
work=fuzz/target/corpus/$target
mkdir -p "$work"
exec cargo +nightly fuzz run "$target" "$work" "fuzz/corpus/$target" -- \
    -runs="$runs" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 "$@"
