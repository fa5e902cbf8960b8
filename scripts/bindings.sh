#!/usr/bin/env bash
# The bindings' own tests, as their users would run them (scripts/test.sh
# runs this after the Rust tests):
# - C: bindings/c/tests/test_nvdepot.c under AddressSanitizer and
#   UndefinedBehaviorSanitizer against libnvdepot.a, the example against
#   libnvdepot.so, then `make install` into a scratch prefix and a program
#   built with `pkg-config --cflags --libs nvdepot` (shared) and
#   `--static`.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)

echo "== C API: make -C bindings/c test (ASan + UBSan)"
make -C bindings/c --no-print-directory test

echo "== C API: make install, then pkg-config builds"
prefix=$target/c-install
rm -rf "$prefix"
make -C bindings/c --no-print-directory install PROFILE=debug PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config's output is flags to split
cc -std=c11 -Wall -Werror bindings/c/examples/hello.c $(pkg-config --cflags --libs nvdepot) \
    -Wl,-rpath,"$prefix/lib" -o "$target/c-tests/hello-installed"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror bindings/c/examples/hello.c -static-libgcc \
    $(pkg-config --cflags nvdepot) "$prefix/lib/libnvdepot.a" $(pkg-config --libs-only-other --static nvdepot) \
    $(pkg-config --static --libs-only-l nvdepot | sed 's/-lnvdepot//') -o "$target/c-tests/hello-static"
for program in hello-installed hello-static; do
    rm -rf "$target/c-tests/$program-data"
    "$target/c-tests/$program" "$target/c-tests/$program-data" | grep -qx "hello = world"
    rm -rf "$target/c-tests/$program-data"
done
echo "C API: installed library and pkg-config file work (shared and static)"
