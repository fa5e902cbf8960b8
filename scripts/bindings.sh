#!/usr/bin/env bash
# The bindings' own tests, as their users would run them (scripts/test.sh
# runs this after the Rust tests):
# - C: bindings/c/tests/test_nvdepot.c under AddressSanitizer and
#   UndefinedBehaviorSanitizer against libnvdepot.a, the example against
#   libnvdepot.so, then `make install` into a scratch prefix and a program
#   built with `pkg-config --cflags --libs nvdepot` (shared) and
#   `--static`.
# - Python: `pip install ./bindings/python` (maturin builds the abi3 wheel
#   from the crate registry and PyPI) into a fresh virtual environment,
#   then its pytest tests and the parameter-server example (NumPy).
# - Java: the JNI library (cargo build -p nvdepot-jni), then `mvn package`
#   in bindings/java: JUnit 5 tests with the JVM checking every JNI call
#   (-Xcheck:jni), then the jar run on its own (it carries the library).
#   Installs a JDK and Maven (apt) if missing.
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

echo "== Python: pip install ./bindings/python into a fresh venv, then pytest"
venv=$target/python-venv
rm -rf "$venv"
if ! python3 -m venv "$venv" 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q python3-venv
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet pytest numpy
# The wheel's build has a target directory of its own (release, abi3).
CARGO_TARGET_DIR=$target/python-wheel "$venv/bin/pip" install --quiet ./bindings/python
(cd bindings/python && "$venv/bin/python" -m pytest -q tests)
rm -rf "$target/params"
"$venv/bin/python" bindings/python/examples/parameter_server.py "$target/params" --rounds 3
rm -rf "$target/params"

echo "== Java: cargo build -p nvdepot-jni, then mvn package (JUnit 5 under -Xcheck:jni) and the jar alone"
if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q default-jdk-headless maven
fi
cargo build --quiet -p nvdepot-jni
(cd bindings/java && mvn -q -B package -Dnvdepot.native.dir="$target/debug")
grep -h "Tests run" bindings/java/target/surefire-reports/*.txt
# The jar alone (its own copy of the JNI library, no -Dnvdepot.library):
rm -rf "$target/jar-check"
java -jar bindings/java/target/nvdepot-0.1.0.jar "$target/jar-check" | grep -qx "hello = world"
echo "Java: the jar runs on its bundled native library"
