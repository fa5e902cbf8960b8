# Shared by .ci/run and the scripts in scripts/: `source scripts/lib.sh`.

# Puts cargo on PATH, installing a toolchain from Debian's packages when
# there is none (a fresh machine as root). rustfmt and clippy are added when
# rustup is there and they are missing; that may fail offline, which only
# matters to the steps that need them.
ensure_cargo() {
    export PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v cargo >/dev/null; then
        echo "cargo not found; installing it from Debian's packages" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        if apt-cache show rustup >/dev/null 2>&1; then
            apt-get install -y -q rustup
            rustup default stable
        else
            # Debian's own toolchain may be older than Cargo.toml's rust-version.
            apt-get install -y -q cargo rustc rustfmt rust-clippy
        fi
    fi
    if command -v rustup >/dev/null; then
        local component
        for component in rustfmt clippy; do
            rustup component list --installed 2>/dev/null | grep -q "^$component" ||
                rustup component add "$component" ||
                echo "warning: could not add $component" >&2
        done
    fi
}

# Builds the release binary of the repository at $1 and prints its path
# (honours CARGO_TARGET_DIR).
release_binary() {
    local repo=$1 target
    cargo build --release --quiet -p nvdepot --manifest-path "$repo/Cargo.toml" >&2
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo/Cargo.toml" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    echo "$target/release/nvdepot"
}

# The nvdepot binary the checks scripts run: $NVDEPOT_BIN when set (CI sets
# it to the debug binary its test build already made, so that no second,
# release build of the workspace is needed), else the release binary of the
# repository at $1.
nvdepot_binary() {
    if [[ -n ${NVDEPOT_BIN:-} ]]; then
        echo "$NVDEPOT_BIN"
    else
        release_binary "$1"
    fi
}
